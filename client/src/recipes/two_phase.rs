//! Two-phase commit: the coordinator's and the sites' handles.

use super::{call, decode_err, Bin, RecipeResult};
use crate::Client;
use wazoo_sdk::serde::Serialize;

/// The outcome of a two-phase commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxOutcome {
    Commit,
    Abort,
}

impl TxOutcome {
    fn parse(s: &str) -> RecipeResult<TxOutcome> {
        match s {
            "commit" => Ok(TxOutcome::Commit),
            "abort" => Ok(TxOutcome::Abort),
            other => Err(decode_err(
                "twophase",
                "decision",
                format!("outcome {other:?}"),
            )),
        }
    }
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct TxArg<'a> {
    tx: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct Begin<'a> {
    tx: &'a str,
    sites: &'a [String],
    #[serde(with = "wazoo_sdk::abi::bytes")]
    data: &'a [u8],
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct SiteArg<'a> {
    tx: &'a str,
    site: &'a str,
}

#[derive(Serialize)]
#[serde(crate = "wazoo_sdk::serde")]
struct VoteArg<'a> {
    tx: &'a str,
    site: &'a str,
    commit: bool,
}

/// The coordinator of a two-phase commit (module `twophase`). Server-side:
/// the transaction node `TX` (data: the transaction), a child per site,
/// `TX/_coordinator` and, once decided, `TX/_decision`. The coordinator's
/// [`decision`](TwoPhaseCommit::decision) wait is what detects a site
/// failing before its vote (its ephemeral `TX/SITE/alive` vanishing),
/// deciding abort.
#[derive(Debug, Clone)]
pub struct TwoPhaseCommit {
    client: Client,
    tx: String,
}

impl TwoPhaseCommit {
    pub fn new(client: &Client, tx: &str) -> TwoPhaseCommit {
        TwoPhaseCommit {
            client: client.clone(),
            tx: tx.to_string(),
        }
    }

    /// Creates the transaction: its node (with `data`, the transaction the
    /// sites read when they join) and one node per site. Site names are one
    /// path component and do not start with `_`.
    pub async fn begin(&self, sites: &[String], data: &[u8]) -> RecipeResult<()> {
        let a = Begin {
            tx: &self.tx,
            sites,
            data,
        };
        call(&self.client, "twophase", "begin", &a).await
    }

    /// Waits for the outcome (watching the sites' presence, one at a time).
    pub async fn decision(&self) -> RecipeResult<TxOutcome> {
        let s: String = call(
            &self.client,
            "twophase",
            "decision",
            &TxArg { tx: &self.tx },
        )
        .await?;
        TxOutcome::parse(&s)
    }

    /// Decides abort unless already decided (e.g. on the coordinator's
    /// timeout); returns the outcome.
    pub async fn abort(&self) -> RecipeResult<TxOutcome> {
        let s: String = call(&self.client, "twophase", "abort", &TxArg { tx: &self.tx }).await?;
        TxOutcome::parse(&s)
    }

    /// A site's handle on this transaction.
    pub fn site(&self, site: &str) -> TwoPhaseSite {
        TwoPhaseSite::new(&self.client, &self.tx, site)
    }
}

/// A participating site of a two-phase commit (module `twophase`).
#[derive(Debug, Clone)]
pub struct TwoPhaseSite {
    client: Client,
    tx: String,
    site: String,
}

impl TwoPhaseSite {
    pub fn new(client: &Client, tx: &str, site: &str) -> TwoPhaseSite {
        TwoPhaseSite {
            client: client.clone(),
            tx: tx.to_string(),
            site: site.to_string(),
        }
    }

    /// Joins: creates the site's ephemeral presence node (its failure before
    /// voting then aborts the transaction); returns the transaction data.
    pub async fn join(&self) -> RecipeResult<Vec<u8>> {
        let a = SiteArg {
            tx: &self.tx,
            site: &self.site,
        };
        let b: Bin = call(&self.client, "twophase", "join", &a).await?;
        Ok(b.0)
    }

    /// Votes; returns the outcome if it is decided (an abort vote decides
    /// at once; the last commit vote decides commit).
    pub async fn vote(&self, commit: bool) -> RecipeResult<Option<TxOutcome>> {
        let a = VoteArg {
            tx: &self.tx,
            site: &self.site,
            commit,
        };
        let s: Option<String> = call(&self.client, "twophase", "vote", &a).await?;
        s.as_deref().map(TxOutcome::parse).transpose()
    }

    /// Waits for the outcome (a watch on `TX/_decision` only).
    pub async fn decision(&self) -> RecipeResult<TxOutcome> {
        let s: String = call(
            &self.client,
            "twophase",
            "decision",
            &TxArg { tx: &self.tx },
        )
        .await?;
        TxOutcome::parse(&s)
    }
}
