//! The deterministic core: no tokio, sockets, files, clock reads or
//! randomness. Time and randomness come in as inputs.
//!
//! Layout: [`tree`], [`txn`], [`session`], [`watch`], [`acl`], [`audit`] (ZooKeeper's
//! audit records as data), [`recipe`]
//! (engine trait, wait table), [`server`] (pipeline), [`member`] (the
//! pipeline joined with ZAB's `Peer`: one member's whole state machine,
//! with its driving contract), [`snapshot`], [`time`] (the two clocks the
//! shell passes in).

#![forbid(unsafe_code)]

pub mod acl;
pub mod audit;
pub(crate) mod id_hash;
pub mod local_reads;
pub mod member;
pub mod quorum_config;
pub mod recipe;
pub mod server;
pub mod session;
pub mod snapshot;
pub mod time;
pub mod tree;
pub mod txn;
pub mod watch;

#[cfg(test)]
mod member_tests;
#[cfg(test)]
mod server_tests;
