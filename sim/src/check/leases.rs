//! Leader leases (docs/ARCHITECTURE.md, "Timing model"): a member acts as
//! leader for clients (proposes their txns) only while no leader of a later
//! epoch has been established, in the world's true time. Members read
//! skewed clocks; the lease must hold across that skew.

use std::collections::BTreeMap;

use wazoo_zab::ServerId;

/// When each epoch's leader was established, in true time.
#[derive(Debug, Default)]
pub struct Leases {
    established_ms: BTreeMap<u32, (ServerId, u64)>,
}

impl Leases {
    /// `leader` leads an established `epoch` at true time `now_ms`.
    pub fn established(&mut self, epoch: u32, leader: ServerId, now_ms: u64) {
        self.established_ms.entry(epoch).or_insert((leader, now_ms));
    }

    /// The leader of `epoch` proposed a client's txn at true time `now_ms`.
    pub fn served(&self, epoch: u32, leader: ServerId, now_ms: u64) -> Result<(), String> {
        match self
            .established_ms
            .range(epoch + 1..)
            .find(|(_, (_, at))| *at <= now_ms)
        {
            Some((later, (other, at))) => Err(format!(
                "lease: member {leader}, leader of epoch {epoch}, proposed at {now_ms} ms, \
                 after member {other} was established as leader of epoch {later} at {at} ms"
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_that_proposes_after_a_later_one_is_established_fails() {
        let mut l = Leases::default();
        l.established(1, 1, 100);
        l.established(2, 2, 5_000);
        assert_eq!(l.served(1, 1, 4_999), Ok(()));
        assert_eq!(l.served(2, 2, 5_000), Ok(()));
        let err = l.served(1, 1, 5_000).unwrap_err();
        assert!(err.contains("epoch 2 at 5000 ms"), "{err}");
    }
}
