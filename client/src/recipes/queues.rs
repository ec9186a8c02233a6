//! Queues: the FIFO queue and the priority queue.

use super::{call, call_once, Bin, PathArg, RecipeResult};
use crate::Client;
use wazoo_sdk::serde::Serialize;

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
pub(super) struct Put<'a> {
    pub(super) path: &'a str,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    pub(super) data: &'a [u8],
    pub(super) priority: u16,
}

/// A distributed FIFO queue (module `queue`), kazoo's `Queue` layout:
/// items are persistent sequential nodes `PATH/entry-100-<seq>`, taken in
/// name order; a take deletes the item in the same atomic step, so each
/// item goes to exactly one taker. Not reliable consumption: an item whose
/// `take` reply is lost is gone.
#[derive(Debug, Clone)]
pub struct Queue {
    client: Client,
    path: String,
}

impl Queue {
    pub fn new(client: &Client, path: &str) -> Queue {
        Queue {
            client: client.clone(),
            path: path.to_string(),
        }
    }

    /// Appends an item; returns its node name.
    pub async fn put(&self, data: &[u8]) -> RecipeResult<String> {
        let a = Put {
            path: &self.path,
            data,
            priority: 100,
        };
        call_once(&self.client, "queue", "put", &a).await
    }

    /// Takes the first item, waiting while the queue is empty (every
    /// waiting taker is woken by a put; the ones that lose the race wait
    /// again).
    pub async fn take(&self) -> RecipeResult<Vec<u8>> {
        let b: Bin =
            call_once(&self.client, "queue", "take", &PathArg { path: &self.path }).await?;
        Ok(b.0)
    }

    /// The number of items.
    pub async fn len(&self) -> RecipeResult<u32> {
        call(&self.client, "queue", "len", &PathArg { path: &self.path }).await
    }

    /// Whether the queue has no items.
    pub async fn is_empty(&self) -> RecipeResult<bool> {
        Ok(self.len().await? == 0)
    }
}

/// A priority queue (module `queue`): items `PATH/entry-PPP-<seq>`, where
/// `PPP` is the priority 0-999 in three digits; lower priorities are taken
/// first, FIFO within a priority. Shares the layout (and the path) with
/// [`Queue`], whose items have priority 100, and with kazoo's `Queue`.
#[derive(Debug, Clone)]
pub struct PriorityQueue {
    queue: Queue,
}

impl PriorityQueue {
    pub fn new(client: &Client, path: &str) -> PriorityQueue {
        PriorityQueue {
            queue: Queue::new(client, path),
        }
    }

    /// Adds an item with a priority (0-999; lower is taken first).
    pub async fn put(&self, data: &[u8], priority: u16) -> RecipeResult<String> {
        let a = Put {
            path: &self.queue.path,
            data,
            priority,
        };
        call_once(&self.queue.client, "queue", "put_priority", &a).await
    }

    /// Takes the item of lowest priority value (waits while empty).
    pub async fn take(&self) -> RecipeResult<Vec<u8>> {
        self.queue.take().await
    }

    pub async fn len(&self) -> RecipeResult<u32> {
        self.queue.len().await
    }

    pub async fn is_empty(&self) -> RecipeResult<bool> {
        self.queue.is_empty().await
    }
}
