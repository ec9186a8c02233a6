//! Group membership.

use super::{call, PathArg, RecipeResult};
use crate::Client;
use wazoo_sdk::serde::{Deserialize, Serialize};

/// A group member: its node name and data.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(crate = "wazoo_sdk::serde")]
pub struct Member {
    pub name: String,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    pub data: Vec<u8>,
}

/// A group's membership: the members (by name) and the group node's
/// cversion (-1 if there is no group node), which changes with every join
/// and leave; pass it to [`Group::watch`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(crate = "wazoo_sdk::serde")]
pub struct Members {
    pub version: i32,
    pub members: Vec<Member>,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct JoinArg<'a> {
    path: &'a str,
    member: &'a str,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: &'a [u8],
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct MemberArg<'a> {
    path: &'a str,
    member: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct WatchArg<'a> {
    path: &'a str,
    version: i32,
}

/// Group membership (module `group`): members are ephemeral nodes
/// `PATH/MEMBER` under a persistent group node, so a failed member leaves
/// by itself.
#[derive(Debug, Clone)]
pub struct Group {
    client: Client,
    path: String,
}

impl Group {
    pub fn new(client: &Client, path: &str) -> Group {
        Group {
            client: client.clone(),
            path: path.to_string(),
        }
    }

    /// Joins as `member` with `data` (updates the data if this session is
    /// already that member; NodeExists if another session is).
    pub async fn join(&self, member: &str, data: &[u8]) -> RecipeResult<()> {
        let a = JoinArg {
            path: &self.path,
            member,
            data,
        };
        call(&self.client, "group", "join", &a).await
    }

    /// Leaves; false if this session was not `member`.
    pub async fn leave(&self, member: &str) -> RecipeResult<bool> {
        let a = MemberArg {
            path: &self.path,
            member,
        };
        call(&self.client, "group", "leave", &a).await
    }

    /// The current members.
    pub async fn members(&self) -> RecipeResult<Members> {
        call(
            &self.client,
            "group",
            "members",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Waits until the membership differs from `version` (a
    /// [`Members::version`]); returns the new membership.
    pub async fn watch(&self, version: i32) -> RecipeResult<Members> {
        let a = WatchArg {
            path: &self.path,
            version,
        };
        call(&self.client, "group", "watch_members", &a).await
    }
}
