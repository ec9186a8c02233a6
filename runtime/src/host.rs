//! What a recipe can do to the tree: the trait the request pipeline
//! implements (defined in the deterministic core, which never sees wasmtime).

pub use wazoo_core::recipe::{path_within, RecipeHost};

use wazoo_proto::ErrorCode;
use wazoo_sdk::abi::{AclEntry, CreateMode, NodeStat};

/// A tree that refuses every operation with `Unimplemented`: the host of a
/// call that must not touch a tree (a measurement of the call itself), and
/// of an instance made ahead of its call, which runs no guest code.
pub struct NoTree;

impl RecipeHost for NoTree {
    fn get(&mut self, _: &str, _: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn children(&mut self, _: &str, _: Option<&str>) -> Result<Vec<String>, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn exists(&mut self, _: &str, _: Option<&str>) -> Result<Option<NodeStat>, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn create(
        &mut self,
        _: &str,
        _: &[u8],
        _: CreateMode,
        _: Option<&[AclEntry]>,
    ) -> Result<String, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn set(&mut self, _: &str, _: &[u8], _: i32) -> Result<NodeStat, ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn delete(&mut self, _: &str, _: i32) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn check(&mut self, _: &str, _: i32) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
    fn notify(&mut self, _: i64, _: &[u8]) -> Result<(), ErrorCode> {
        Err(ErrorCode::Unimplemented)
    }
}
