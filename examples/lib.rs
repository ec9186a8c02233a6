//! Small programs against a running server: the 3-member ensemble that
//! `cargo run --release -p wazoo -- dev` starts with the built-in recipes
//! (127.0.0.1:2181-2183), `wazoo serve`, or Apache ZooKeeper for the ones
//! that use no recipe. Run one with
//! `cargo run -p wazoo-examples --example NAME -- [SERVER] [ARGS]`; each
//! file's header gives its exact command line.
//!
//! Layout (one example per file, next to this one):
//! - `lock`, `queue`, `election`, `double_barrier`, `twophase`: the
//!   built-in recipes through `wazoo_client::recipes`.
//! - `custom_recipe`: a recipe written from scratch with the SDK
//!   (`recipes-wasm/lease`).
//! - `config_watch`: a configuration watch with the plain ZooKeeper API.
//! - `cli`: the `wazoo cli` shell outside of the `wazoo` binary.
//! - `bench`: one connection pipelining getData, against the
//!   `zookeeper-client` crate on the same server.
//!
//! This library has no code of its own.
#![forbid(unsafe_code)]
