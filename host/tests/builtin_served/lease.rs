//! The lease: the custom recipe of examples/custom_recipe.rs.

use super::*;

#[derive(serde::Deserialize, Debug)]
struct Grant {
    granted: bool,
    holder: String,
    expires_ms: i64,
    now_ms: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_is_exclusive_renewable_and_lapses() {
    let (plugins, opts) = options(&["lease"]);
    let server = WazooServer::start(opts.cfg("extendedTypesEnabled=true")).expect("start wazoo");
    wait_deployed(server.addr(), &["lease"]);
    let _plugins = plugins;
    let c = connect(&server.addr().to_string()).await;
    let acquire = |holder: &'static str, ttl_ms: i64| {
        let c = c.clone();
        async move {
            #[derive(serde::Serialize)]
            struct A<'a> {
                name: &'a str,
                holder: &'a str,
                ttl_ms: i64,
            }
            let a = A {
                name: "l",
                holder,
                ttl_ms,
            };
            wazoo_client::recipes::call::<_, Grant>(&c, "lease", "acquire", &a)
                .await
                .expect("lease.acquire")
        }
    };
    let g = acquire("alice", 800).await;
    assert!(g.granted);
    assert_eq!(g.expires_ms - g.now_ms, 800);
    let g = acquire("bob", 800).await;
    assert!(!g.granted);
    assert_eq!(g.holder, "alice");
    assert!(g.expires_ms > g.now_ms);
    // The lease node holds "holder\nexpires".
    let (data, stat) = c.get_data("/leases/l").await.unwrap();
    assert!(data.starts_with(b"alice\n"), "{data:?}");
    assert_eq!(stat.version, 0);
    assert!(acquire("alice", 800).await.granted, "renewal");
    tokio::time::sleep(Duration::from_millis(900)).await;
    let g = acquire("bob", 800).await;
    assert!(g.granted, "alice's lease lapsed: {g:?}");
    #[derive(serde::Serialize)]
    struct R<'a> {
        name: &'a str,
        holder: &'a str,
    }
    let rel = |holder: &'static str| {
        let c = c.clone();
        async move {
            wazoo_client::recipes::call::<_, bool>(&c, "lease", "release", &R { name: "l", holder })
                .await
        }
    };
    assert!(!rel("alice").await.unwrap());
    assert!(rel("bob").await.unwrap());
    assert!(c.exists("/leases/l").await.unwrap().is_none());
    // Bad arguments are refused before anything is written.
    #[derive(serde::Serialize)]
    struct A2<'a> {
        name: &'a str,
        holder: &'a str,
        ttl_ms: i64,
    }
    let err = wazoo_client::recipes::call::<_, Grant>(
        &c,
        "lease",
        "acquire",
        &A2 {
            name: "a/b",
            holder: "x",
            ttl_ms: 5,
        },
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), -8, "{err}");
}
