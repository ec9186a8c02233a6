//! Barriers: the barrier and the double barrier.

use super::{call, PathArg, RecipeResult};
use crate::Client;
use wazoo_sdk::serde::Serialize;

/// A simple barrier (module `barrier`): up while the node `PATH` exists.
#[derive(Debug, Clone)]
pub struct Barrier {
    client: Client,
    path: String,
}

impl Barrier {
    pub fn new(client: &Client, path: &str) -> Barrier {
        Barrier {
            client: client.clone(),
            path: path.to_string(),
        }
    }

    /// Puts the barrier up (creates the node and its parents); false if it
    /// was already up.
    pub async fn set(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "barrier",
            "set",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Takes the barrier down; false if it was not up.
    pub async fn remove(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "barrier",
            "remove",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Waits until the barrier is down (an exists watch on the node).
    pub async fn wait(&self) -> RecipeResult<()> {
        call(
            &self.client,
            "barrier",
            "wait",
            &PathArg { path: &self.path },
        )
        .await
    }
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Enter<'a> {
    path: &'a str,
    name: &'a str,
    count: u32,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Leave<'a> {
    path: &'a str,
    name: &'a str,
}

/// A double barrier (module `double_barrier`), the ZooKeeper recipe: each
/// process has an ephemeral node `PATH/NAME`; `enter` waits until `count`
/// are there (the last one creates `PATH/ready`), `leave` until all are
/// gone (the lowest watches the highest, the others delete theirs and watch
/// the lowest). A process that dies inside does not block the others.
#[derive(Debug, Clone)]
pub struct DoubleBarrier {
    client: Client,
    path: String,
    name: String,
    count: u32,
}

impl DoubleBarrier {
    /// `name`: this process's node name (one path component, not "ready");
    /// `count`: how many processes must enter.
    pub fn new(client: &Client, path: &str, name: &str, count: u32) -> DoubleBarrier {
        DoubleBarrier {
            client: client.clone(),
            path: path.to_string(),
            name: name.to_string(),
            count,
        }
    }

    /// Enters; waits until `count` processes have.
    pub async fn enter(&self) -> RecipeResult<()> {
        let a = Enter {
            path: &self.path,
            name: &self.name,
            count: self.count,
        };
        call(&self.client, "double_barrier", "enter", &a).await
    }

    /// Leaves; waits until every process has.
    pub async fn leave(&self) -> RecipeResult<()> {
        let a = Leave {
            path: &self.path,
            name: &self.name,
        };
        call(&self.client, "double_barrier", "leave", &a).await
    }
}
