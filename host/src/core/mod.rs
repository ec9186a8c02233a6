//! The deterministic core: no tokio, sockets, files, clock reads or
//! randomness. Time and randomness come in as inputs.

pub mod acl;
pub mod recipe;
pub mod server;
pub mod session;
pub mod time;
pub mod tree;
pub mod txn;
pub mod watch;
pub mod zab;

#[cfg(test)]
mod server_tests;
