//! wazoo: a ZooKeeper-compatible coordination server.
//!
//! Layout:
//! - [`core`]: the deterministic core — tree, sessions, watches, ACLs and
//!   the request pipeline — with no I/O, clocks or randomness.
//! - [`member`]: the I/O shell of one member: recovery, the core thread,
//!   the group-commit log, snapshots and purges.
//! - [`net`]: the client port (framing, backpressure, four-letter words).
//! - [`admin`]: four-letter word answers.
//! - [`config`]: reading zoo.cfg.

pub mod admin;
pub mod config;
pub mod core;
pub mod ensemble_member;
pub mod member;
pub mod metrics;
pub mod net;
pub mod plugin;
pub mod quorum;
