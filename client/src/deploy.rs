//! Deploying recipe modules (docs/RECIPES.md, "Deploy"): a deploy is a
//! `setData` of the module's bytes on the virtual node /zookeeper/recipes,
//! an undeploy a `delete` of /zookeeper/recipes/NAME; both are committed
//! through the ensemble's log and need ADMIN in the node's ACL (by default
//! `world:anyone:r`: the super user alone; a `set_acl` of the node, from a
//! client without a chroot, changes it). Paths here ignore the client's
//! chroot: the node is the server's own.

use sha2::{Digest, Sha256};
use wazoo_proto::{Request, Response};

use crate::{Client, Error, Result};

/// The virtual node listing the deployed modules.
pub const RECIPES_NODE: &str = "/zookeeper/recipes";

/// A module the ensemble serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeployedRecipe {
    pub name: String,
    pub version: String,
    /// SHA-256 of the module's bytes, hex.
    pub sha256: String,
}

/// The SHA-256 of a module, hex (as the server reports it).
pub fn sha256_hex(module: &[u8]) -> String {
    Sha256::digest(module)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The modules listed in the data of /zookeeper/recipes (`module=...
/// version=... hash=...` lines).
pub fn parse_recipes_node(data: &[u8]) -> Vec<DeployedRecipe> {
    let text = String::from_utf8_lossy(data);
    text.lines()
        .filter_map(|line| {
            let field = |k: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                    .map(str::to_string)
            };
            let name = field("module")?;
            // `module=*`: the counters of calls that found no module.
            if name == "*" {
                return None;
            }
            Some(DeployedRecipe {
                name,
                version: field("version")?,
                sha256: field("hash")?,
            })
        })
        .collect()
}

impl Client {
    /// Deploys a module (replacing one of the same name). Returns once the
    /// deploy is committed and applied on the member this client is
    /// connected to, with what that member now serves under the module's
    /// name. A module the leader's runtime refuses is `BadArguments` (the
    /// leader logs why) and the old version keeps serving; without ADMIN
    /// in the ACL of /zookeeper/recipes it is `NoAuth`.
    pub async fn deploy(&self, module: &[u8]) -> Result<DeployedRecipe> {
        let sha256 = sha256_hex(module);
        self.call(Request::SetData {
            path: RECIPES_NODE.into(),
            data: Some(module.to_vec()),
            version: -1,
        })
        .await?;
        self.deployed_recipes()
            .await?
            .into_iter()
            .find(|r| r.sha256 == sha256)
            .ok_or_else(|| {
                Error::BadArguments(format!(
                    "module {sha256} was committed but the server does not list it (another deploy replaced it?)"
                ))
            })
    }

    /// Undeploys the module `name` (`NoNode` if none is deployed).
    pub async fn undeploy(&self, name: &str) -> Result<()> {
        self.call(Request::Delete {
            path: format!("{RECIPES_NODE}/{name}"),
            version: -1,
        })
        .await
        .map(|_| ())
    }

    /// The modules the connected member serves.
    pub async fn deployed_recipes(&self) -> Result<Vec<DeployedRecipe>> {
        match self
            .call(Request::GetData {
                path: RECIPES_NODE.into(),
                watch: false,
            })
            .await?
        {
            Response::GetData { data, .. } => Ok(parse_recipes_node(&data.unwrap_or_default())),
            other => Err(Error::BadArguments(format!(
                "unexpected reply to getData {RECIPES_NODE}: {other:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipes_node_lines_parse_into_modules_without_the_unserved_calls_line() {
        let data = b"module=lock version=0.1.0 hash=ab12 calls=3 errors=0 fuel_used=9 loads=1 methods=acquire,release\nmodule=* version=- hash=- calls=1 errors=1 fuel_used=0 loads=0 methods= errors_by_kind=unknown_module:1\npending_waits=0\n";
        assert_eq!(
            parse_recipes_node(data),
            vec![DeployedRecipe {
                name: "lock".into(),
                version: "0.1.0".into(),
                sha256: "ab12".into()
            }]
        );
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
