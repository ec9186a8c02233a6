//! Drives the standalone pipeline (`Server`) with creates or setDatas from
//! 16 connections x 8 in flight, the shell's part reduced to reporting
//! every txn durable and every send written at once. For callgrind: run it
//! with two request counts and take the difference over the extra
//! requests (the setup cancels out). Also counts allocations per request.
//!
//! `cargo run --release -p wazoo-core --example write_profile -- create 20000`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use wazoo_core::server::{Input, Output, Server, ServerConfig};
use wazoo_core::time::Now;
use wazoo_proto::{Acl, ConnectRequest, CreateRequest, Request};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        REALLOCS.fetch_add(1, Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const CONNS: u64 = 16;
const INFLIGHT: usize = 8;
const SET_NODES: usize = 64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let op = args.get(1).map(String::as_str).unwrap_or("create");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let now = Now::same(1_000_000);
    let mut s = Server::new(ServerConfig::default(), now);
    let pump = |s: &mut Server| loop {
        let mut durable = None;
        let mut written = Vec::new();
        for o in s.take_outputs() {
            match o {
                Output::Persist { zxid, .. } => durable = Some(zxid),
                Output::Send { conn, bytes, .. } => written.push((conn, bytes.len() as u64)),
                _ => {}
            }
        }
        if durable.is_none() && written.is_empty() {
            return;
        }
        if let Some(zxid) = durable {
            s.handle(Input::Durable { zxid }, now);
        }
        for (conn, bytes) in written {
            s.handle(Input::Written { conn, bytes }, now);
        }
    };
    for conn in 1..=CONNS {
        s.handle(
            Input::Connect {
                conn,
                peer: Some("127.0.0.1:5000".parse().unwrap()),
                req: ConnectRequest {
                    protocol_version: 0,
                    last_zxid_seen: 0,
                    timeout_ms: 30_000,
                    session_id: 0,
                    passwd: vec![0; 16],
                    read_only: Some(false),
                },
                fresh_password: [conn as u8; 16],
            },
            now,
        );
        pump(&mut s);
    }
    let create = |path: String| {
        Request::Create(CreateRequest {
            path,
            data: Some(vec![b'x'; 100]),
            acl: Acl::open_unsafe(),
            flags: 0,
            ttl: None,
        })
    };
    let mut xid = 1;
    s.handle(
        Input::Request {
            conn: 1,
            xid,
            req: create("/bench".into()),
        },
        now,
    );
    pump(&mut s);
    for j in 0..SET_NODES {
        xid += 1;
        let req = create(format!("/bench/s{j:04}"));
        s.handle(Input::Request { conn: 1, xid, req }, now);
        pump(&mut s);
    }
    let (a0, r0) = (ALLOCS.load(Relaxed), REALLOCS.load(Relaxed));
    let mut count = [0usize; CONNS as usize];
    let mut done = 0;
    while done < n {
        for conn in 1..=CONNS {
            for _ in 0..INFLIGHT {
                if done == n {
                    break;
                }
                let c = &mut count[conn as usize - 1];
                *c += 1;
                xid += 1;
                let req = if op == "create" {
                    create(format!("/bench/c{conn:02}-{c:07}"))
                } else {
                    Request::SetData {
                        path: format!("/bench/s{:04}", (conn as usize * 7 + *c) % SET_NODES),
                        data: Some(vec![b'y'; 100]),
                        version: -1,
                    }
                };
                s.handle(Input::Request { conn, xid, req }, now);
                done += 1;
            }
        }
        pump(&mut s);
    }
    let (a1, r1) = (ALLOCS.load(Relaxed), REALLOCS.load(Relaxed));
    println!(
        "{op} x {n}: {:.2} allocations and {:.2} reallocs per request (the request's own \
         path and data included)",
        (a1 - a0) as f64 / n as f64,
        (r1 - r0) as f64 / n as f64
    );
}
