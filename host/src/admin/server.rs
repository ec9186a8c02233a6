//! The AdminServer's HTTP port (ZooKeeper Administrator's Guide, "The
//! AdminServer"): `GET <admin.commandURL>/<command>` answers the command
//! ([`super::commands`]) as JSON, `GET <admin.commandURL>` lists the
//! commands as links, as ZooKeeper 3.8's Jetty servlet does. A command
//! runs on the member's core loop, between two batches, as a four-letter
//! word does.
//!
//! Statuses are ZooKeeper's: 200 for every command, an unknown one
//! included (its `error` says so); 404 outside the command URL; 405 for a
//! method other than GET (400 in HTTP/1.0, as Java's `HttpServlet`
//! answers); 403 for TRACE. Bounds: [`crate::http`]'s, with
//! `admin.idleTimeout` as the time a connection may stay silent.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::sync::{mpsc, oneshot};

use crate::config::AdminServerConfig;
use crate::http::{Limits, Request, Response};
use crate::member::Event;

/// How long a command may wait for the core loop.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Connections the AdminServer holds open at once.
const CONNECTIONS_MAX: usize = 32;

/// Binds the AdminServer's port and serves it on the member's runtime.
pub fn start(cfg: &AdminServerConfig, events: mpsc::Sender<Event>) -> Result<SocketAddr> {
    let bind = || -> std::io::Result<tokio::net::TcpListener> {
        let l = std::net::TcpListener::bind(cfg.addr)?;
        l.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(l)
    };
    let listener = bind().with_context(|| {
        format!(
            "cannot start the AdminServer on {} (admin.serverAddress, admin.serverPort; admin.enableServer=false turns it off)",
            cfg.addr
        )
    })?;
    let addr = listener.local_addr()?;
    let limits = Limits {
        idle: Duration::from_millis(cfg.idle_timeout_ms),
        connections_max: CONNECTIONS_MAX,
        ..Limits::default()
    };
    let url: Arc<str> = cfg.command_url.as_str().into();
    tracing::info!(%addr, command_url = %url, "AdminServer on http://{addr}{url}");
    crate::http::serve(listener, limits, move |req, _| {
        let (events, url) = (events.clone(), Arc::clone(&url));
        async move { route(&url, req, &events).await }
    });
    Ok(addr)
}

async fn route(url: &str, req: Request, events: &mpsc::Sender<Event>) -> Response {
    if req.method == "TRACE" {
        return Response::status(403);
    }
    let rest = match req.path.strip_prefix(url) {
        Some("") => "",
        Some(r) if r.starts_with('/') => &r[1..],
        _ => return Response::status(404),
    };
    if req.method != "GET" {
        // As Java's HttpServlet answers a method it does not serve.
        return Response::status(if req.http10 { 400 } else { 405 });
    }
    if rest.is_empty() {
        let mut body = String::new();
        for name in super::commands::primary_names() {
            body.push_str(&format!("<a href=\"{url}/{name}\">{name}</a>\n<br/>\n"));
        }
        return Response::new(200, "text/html; charset=utf-8", body);
    }
    let (tx, rx) = oneshot::channel();
    let asked = events
        .send(Event::AdminCommand {
            name: rest.to_string(),
            kwargs: req.query,
            reply: tx,
        })
        .await;
    let answer = match asked {
        Ok(()) => tokio::time::timeout(ANSWER_WAIT, rx).await,
        Err(_) => return Response::status(503),
    };
    match answer {
        Ok(Ok(json)) => {
            let body = serde_json::to_string_pretty(&json).unwrap_or_default();
            Response::new(200, "application/json", body)
        }
        _ => Response::status(503),
    }
}
