//! Leader election.

use super::{call, Bin, PathArg, PathId, RecipeResult};
use crate::Client;

/// Leader election (module `election`), the ZooKeeper recipe with kazoo's
/// `Election` node names: candidates `PATH/<session hex>__lock__<seq>`
/// (ephemeral sequential, data = the id), the lowest leads, each candidate
/// watches only the next lower one. The leader acknowledges with
/// [`ack`](Election::ack) (node `PATH/__ack__`), which
/// [`wait_ack`](Election::wait_ack) waits for.
#[derive(Debug, Clone)]
pub struct Election {
    client: Client,
    path: String,
    id: Vec<u8>,
}

impl Election {
    /// `id`: this candidate's data, what [`leader`](Election::leader) returns.
    pub fn new(client: &Client, path: &str, id: &[u8]) -> Election {
        Election {
            client: client.clone(),
            path: path.to_string(),
            id: id.to_vec(),
        }
    }

    /// Volunteers and waits until this session leads; returns its node.
    pub async fn campaign(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "election", "campaign", &a).await
    }

    /// The current leader's id.
    pub async fn leader(&self) -> RecipeResult<Option<Vec<u8>>> {
        let b: Option<Bin> = call(
            &self.client,
            "election",
            "leader",
            &PathArg { path: &self.path },
        )
        .await?;
        Ok(b.map(|b| b.0))
    }

    /// Withdraws (leader or not); false if this session was no candidate.
    pub async fn resign(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "election",
            "resign",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// As the leader: acknowledges that the leader procedure ran. Fails
    /// with APIError (-100) if this session does not lead.
    pub async fn ack(&self) -> RecipeResult<()> {
        call(
            &self.client,
            "election",
            "ack",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Waits until the current leader has acknowledged; returns its id.
    pub async fn wait_ack(&self) -> RecipeResult<Vec<u8>> {
        let b: Bin = call(
            &self.client,
            "election",
            "wait_ack",
            &PathArg { path: &self.path },
        )
        .await?;
        Ok(b.0)
    }
}
