//! Quotas as ZooKeeper 3.8 keeps them in the tree ("ZooKeeper Quota's
//! Guide").

use super::*;

/// What zkCli's setquota does: the limits node, then the stats node.
pub(super) fn set_quota(f: &mut Fixture, path: &str, limits: &str) {
    let mut cur = String::from(QUOTA_ROOT);
    for part in path.split('/').filter(|s| !s.is_empty()) {
        cur = format!("{cur}/{part}");
        if !f.tree.exists(&cur) {
            f.create(&cur, b"");
        }
    }
    f.create(&limit_path(path), limits.as_bytes());
    f.create(&stat_path(path), b"count=0,bytes=0");
}

fn quota_stats(f: &Fixture, path: &str) -> String {
    String::from_utf8(f.tree.node(&stat_path(path)).unwrap().data().to_vec()).unwrap()
}

#[test]
fn quota_stats_follow_creates_deletes_and_writes_under_the_quota() {
    let mut f = Fixture::new();
    f.create("/app", b"12");
    f.create("/app/a", b"345");
    f.create("/other", b"zzzz");
    set_quota(&mut f, "/app", "count=10,bytes=-1");
    // Creating the stats node recounts the subtree, the quota root included.
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=5");
    assert_eq!(f.tree.quota_root_of("/app/a/deep"), Some("/app"));
    assert_eq!(f.tree.quota_root_of("/app"), Some("/app"));
    assert_eq!(f.tree.quota_root_of("/apple"), None);
    assert_eq!(f.tree.quota_root_of("/other"), None);

    f.create("/app/b", b"6789");
    assert_eq!(quota_stats(&f, "/app"), "count=3,bytes=9");
    f.set_data("/app/a", b"3");
    assert_eq!(quota_stats(&f, "/app"), "count=3,bytes=7");
    f.delete("/app/b");
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=3");
    f.create("/other/x", b"ignored");
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=3");
    // The stats node keeps its own stat (apply rewrites only its data).
    assert_eq!(f.stat(&stat_path("/app")).version, 0);

    // Removing the limits node ends the tracking.
    f.delete(&limit_path("/app"));
    assert_eq!(f.tree.quota_root_of("/app/a"), None);
    f.create("/app/c", b"");
    assert_eq!(quota_stats(&f, "/app"), "count=2,bytes=3");
    let back = reload(&f.tree);
    assert!(back == f.tree);
}

#[test]
fn hard_quota_limits_refuse_and_soft_ones_pass() {
    let mut f = Fixture::new();
    f.create("/hard", b"");
    f.create("/soft", b"");
    set_quota(
        &mut f,
        "/hard",
        "count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=3",
    );
    set_quota(&mut f, "/soft", "count=1,bytes=1");
    assert_eq!(quota_stats(&f, "/hard"), "count=1,bytes=0");
    assert_eq!(f.tree.check_quota("/hard/a", 10, 1), Ok(()));
    assert_eq!(
        f.tree.check_quota("/hard/a", 11, 1),
        Err(ErrorCode::QuotaExceeded)
    );
    f.create("/hard/a", b"12345");
    f.create("/hard/b", b"");
    assert_eq!(
        f.tree.check_quota("/hard/c", 0, 1),
        Err(ErrorCode::QuotaExceeded)
    );
    assert_eq!(f.tree.check_quota("/hard/a", 5, 0), Ok(()));
    assert_eq!(
        f.tree.check_quota("/hard/a", 6, 0),
        Err(ErrorCode::QuotaExceeded)
    );
    assert_eq!(f.tree.check_quota("/hard/a", -5, 0), Ok(()));
    assert_eq!(
        f.tree.check_quota("/soft/x", 1_000, 1),
        Ok(()),
        "soft limits only warn"
    );
    assert_eq!(f.tree.check_quota("/elsewhere", 1_000, 1), Ok(()));
}
