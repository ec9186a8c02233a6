//! Locks: the exclusive lock, the read-write lock and the semaphore.

use super::{call, Bin, NodeArg, PathArg, PathId, RecipeResult};
use crate::Client;
use wazoo_sdk::serde::Serialize;

/// An exclusive, fair lock (module `lock`). Server-side: an ephemeral
/// sequential node `PATH/<session hex>__lock__<seq>` (kazoo's naming, so
/// kazoo's `Lock`/`WriteLock`/`ReadLock` on the same path contend with it);
/// the lowest sequence holds; a waiter watches only its predecessor. One
/// contender per session and path: acquiring twice from one session returns
/// the same node.
#[derive(Debug, Clone)]
pub struct Lock {
    client: Client,
    path: String,
    id: Vec<u8>,
    creator_acl: bool,
}

/// The lock's `acquire` arguments.
#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct LockAcquire<'a> {
    path: &'a str,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    id: &'a [u8],
    creator_acl: bool,
}

impl Lock {
    pub fn new(client: &Client, path: &str) -> Lock {
        Lock {
            client: client.clone(),
            path: path.to_string(),
            id: Vec::new(),
            creator_acl: false,
        }
    }

    /// Creates the lock node (and the lock's directories the acquire
    /// creates) with ZooKeeper's CREATOR_ALL_ACL: all permissions for the
    /// identities this client authenticated as (`add_auth`, SASL, a client
    /// certificate), none for anyone else. The acquire fails with
    /// INVALID_ACL if the client authenticated as nothing.
    pub fn with_creator_acl(mut self) -> Lock {
        self.creator_acl = true;
        self
    }

    /// The data written into the lock node (kazoo's `identifier`).
    pub fn with_id(mut self, id: &[u8]) -> Lock {
        self.id = id.to_vec();
        self
    }

    /// Waits until the lock is held; returns the lock node's path.
    pub async fn acquire(&self) -> RecipeResult<String> {
        let a = LockAcquire {
            path: &self.path,
            id: &self.id,
            creator_acl: self.creator_acl,
        };
        call(&self.client, "lock", "acquire", &a).await
    }

    /// Deletes the caller's lock node (held or still waiting); false if
    /// there was none.
    pub async fn release(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "lock",
            "release",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// The holding node's path, if the lock is held by a writer (none when
    /// free or held by kazoo readers).
    pub async fn holder(&self) -> RecipeResult<Option<String>> {
        call(
            &self.client,
            "lock",
            "holder",
            &PathArg { path: &self.path },
        )
        .await
    }
}

// ---- rwlock --------------------------------------------------------------

/// A shared (read/write) lock, revocable (module `rwlock`). Server-side:
/// `PATH/<session hex>__rlock__<seq>` for readers, `__lock__` for writers
/// (kazoo's `ReadLock`/`WriteLock` names). A reader waits only for lower
/// writers; a writer for any lower node. Revocation: [`revoke`] writes
/// "unlock" into a holder's node; the holder learns it from
/// [`watch_revoke`].
///
/// [`revoke`]: ReadWriteLock::revoke
/// [`watch_revoke`]: ReadWriteLock::watch_revoke
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    client: Client,
    path: String,
    id: Vec<u8>,
}

impl ReadWriteLock {
    pub fn new(client: &Client, path: &str) -> ReadWriteLock {
        ReadWriteLock {
            client: client.clone(),
            path: path.to_string(),
            id: Vec::new(),
        }
    }

    /// The data written into the lock nodes.
    pub fn with_id(mut self, id: &[u8]) -> ReadWriteLock {
        self.id = id.to_vec();
        self
    }

    /// Waits until a read lock is held; returns its node's path.
    pub async fn read_acquire(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "rwlock", "read_acquire", &a).await
    }

    /// Waits until the write lock is held; returns its node's path.
    pub async fn write_acquire(&self) -> RecipeResult<String> {
        let a = PathId {
            path: &self.path,
            id: &self.id,
        };
        call(&self.client, "rwlock", "write_acquire", &a).await
    }

    /// Deletes the caller's read and write nodes; how many there were.
    pub async fn release(&self) -> RecipeResult<u32> {
        call(
            &self.client,
            "rwlock",
            "release",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// Asks the holder of `node` (a lock node path) to release: sets its
    /// data to "unlock". False if the node is gone.
    pub async fn revoke(&self, node: &str) -> RecipeResult<bool> {
        call(&self.client, "rwlock", "revoke", &NodeArg { node }).await
    }

    /// Waits until someone asks to revoke `node` (the caller's lock node):
    /// true; false if the node went away first (released, session lost).
    pub async fn watch_revoke(&self, node: &str) -> RecipeResult<bool> {
        call(&self.client, "rwlock", "watch_revoke", &NodeArg { node }).await
    }
}

// ---- semaphore -----------------------------------------------------------

/// A semaphore of `max_leases` leases (module `semaphore`), kazoo's layout:
/// leases `PATH/<session hex>` (ephemeral), `max_leases` as `PATH`'s data,
/// and acquirers queued on the exclusive lock `PATH-__lock__`; only the
/// queue's head watches the leases (no herd, first come first served).
#[derive(Debug, Clone)]
pub struct Semaphore {
    client: Client,
    path: String,
    max_leases: u32,
    id: Vec<u8>,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct SemAcquire<'a> {
    path: &'a str,
    max_leases: u32,
    #[serde(with = "wazoo_sdk::abi::bytes")]
    id: &'a [u8],
}

impl Semaphore {
    pub fn new(client: &Client, path: &str, max_leases: u32) -> Semaphore {
        Semaphore {
            client: client.clone(),
            path: path.to_string(),
            max_leases,
            id: Vec::new(),
        }
    }

    /// The data written into the lease node.
    pub fn with_id(mut self, id: &[u8]) -> Semaphore {
        self.id = id.to_vec();
        self
    }

    /// Waits for a lease; returns the lease node's path. Fails with
    /// BadArguments if the semaphore was created with another `max_leases`.
    pub async fn acquire(&self) -> RecipeResult<String> {
        let a = SemAcquire {
            path: &self.path,
            max_leases: self.max_leases,
            id: &self.id,
        };
        call(&self.client, "semaphore", "acquire", &a).await
    }

    /// Gives the lease back (or leaves the queue); false if there was none.
    pub async fn release(&self) -> RecipeResult<bool> {
        call(
            &self.client,
            "semaphore",
            "release",
            &PathArg { path: &self.path },
        )
        .await
    }

    /// The data of every lease (kazoo's `lease_holders`).
    pub async fn holders(&self) -> RecipeResult<Vec<Vec<u8>>> {
        let v: Vec<Bin> = call(
            &self.client,
            "semaphore",
            "holders",
            &PathArg { path: &self.path },
        )
        .await?;
        Ok(v.into_iter().map(|b| b.0).collect())
    }
}
