//! What a recipe can do to the tree: the trait the request pipeline implements.

use wazoo_proto::ErrorCode;
use wazoo_sdk::abi::{CreateMode, NodeStat};

/// The tree as one recipe step sees it, answered by the pipeline's prep view
/// (committed state plus outstanding changes, including what this step has
/// staged so far).
///
/// Contract for implementers:
/// - Reads answer from the view; writes (`create`, `set`, `delete`) and
///   `notify` are STAGED, never applied directly. If the step ends with
///   `Ok(Outcome)` whose reply is `Done` or `Wait`, the staged writes,
///   watch registrations and notifications become one txn; if it ends with
///   `Reply::Error` or `Err(RecipeError)`, all of it is discarded.
/// - The runtime has already checked that every path lies within the
///   module's declared prefixes (see [`path_within`]); ACL checks with the
///   caller's identity are the implementer's job.
/// - `watch: Some(token)` registers a one-shot watch (data watch for
///   `get`/`exists`, child watch for `children`) whose firing runs the
///   module's `on_watch` with that token; it is registered even when the
///   read fails with NoNode for `exists` (as ZooKeeper does).
/// - Errors are ZooKeeper error codes, handed to the guest as such.
pub trait RecipeHost {
    fn get(&mut self, path: &str, watch: Option<&str>) -> Result<(Vec<u8>, NodeStat), ErrorCode>;
    fn children(&mut self, path: &str, watch: Option<&str>) -> Result<Vec<String>, ErrorCode>;
    fn exists(&mut self, path: &str, watch: Option<&str>) -> Result<Option<NodeStat>, ErrorCode>;
    /// Returns the created path (with the sequence suffix when sequential).
    fn create(&mut self, path: &str, data: &[u8], mode: CreateMode) -> Result<String, ErrorCode>;
    /// `version` -1 matches any version.
    fn set(&mut self, path: &str, data: &[u8], version: i32) -> Result<NodeStat, ErrorCode>;
    fn delete(&mut self, path: &str, version: i32) -> Result<(), ErrorCode>;
    fn check(&mut self, path: &str, version: i32) -> Result<(), ErrorCode>;
    /// Stages a notification to `session`, delivered after this step's changes.
    fn notify(&mut self, session: i64, payload: &[u8]) -> Result<(), ErrorCode>;
}

/// Whether `path` lies within one of `prefixes`: equal to a prefix or below
/// it (`/a` covers `/a` and `/a/b`, not `/ab`); `/` covers everything.
pub fn path_within(path: &str, prefixes: &[String]) -> bool {
    prefixes.iter().any(|p| {
        let p = p.as_str();
        if p == "/" {
            return path.starts_with('/');
        }
        path == p || (path.starts_with(p) && path.as_bytes().get(p.len()) == Some(&b'/'))
    })
}

#[cfg(test)]
mod tests {
    use super::path_within;

    #[test]
    fn prefixes_are_whole_components() {
        let p = vec!["/locks".to_string(), "/q/items".to_string()];
        assert!(path_within("/locks", &p));
        assert!(path_within("/locks/a/b", &p));
        assert!(path_within("/q/items/x", &p));
        assert!(!path_within("/locksmith", &p));
        assert!(!path_within("/q", &p));
        assert!(!path_within("/", &p));
        assert!(path_within("/anything", &["/".to_string()]));
        assert!(!path_within("/x", &[]));
    }
}
