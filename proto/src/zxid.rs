//! The transaction id, one type for every crate: the pipeline, ZAB, the
//! log and the shell all name a txn by it.

use std::fmt;

/// A ZooKeeper transaction id: `epoch << 32 | counter` (ZooKeeper
/// Internals, "Atomic Broadcast").
///
/// The leader of epoch `e` numbers its proposals `e:1`, `e:2`, ... so the
/// numeric order of zxids is the total order of txns. Counter 0 is never the
/// zxid of a txn; `Zxid::ZERO` means "nothing yet".
///
/// ZooKeeper's records carry a zxid as a signed 64-bit `long`; the
/// conversion to and from that form ([`Zxid::from_wire`],
/// [`Zxid::to_wire`]) is made only where a record is encoded or decoded.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Zxid(pub u64);

impl Zxid {
    pub const ZERO: Zxid = Zxid(0);

    pub const fn new(epoch: u32, counter: u32) -> Zxid {
        Zxid(((epoch as u64) << 32) | counter as u64)
    }

    pub const fn epoch(self) -> u32 {
        (self.0 >> 32) as u32
    }

    pub const fn counter(self) -> u32 {
        self.0 as u32
    }

    /// The zxid after this one in the same epoch.
    pub const fn next(self) -> Zxid {
        Zxid(self.0 + 1)
    }

    /// The zxid a record carries as jute's `long`. A negative value is no
    /// txn's (ZooKeeper sends -1 where none applies) and reads as zero.
    pub const fn from_wire(v: i64) -> Zxid {
        if v < 0 {
            Zxid::ZERO
        } else {
            Zxid(v as u64)
        }
    }

    /// This zxid as jute's `long` (every zxid ZooKeeper makes fits).
    pub const fn to_wire(self) -> i64 {
        self.0 as i64
    }
}

impl fmt::Debug for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.epoch(), self.counter())
    }
}

impl fmt::Display for Zxid {
    /// ZooKeeper's spelling: `0x500000003`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::LowerHex for Zxid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zxid_packs_epoch_and_counter() {
        let z = Zxid::new(5, 3);
        assert_eq!(z.0, 0x5_0000_0003);
        assert_eq!((z.epoch(), z.counter()), (5, 3));
        assert_eq!(z.to_string(), "0x500000003");
        assert_eq!(format!("0x{z:x}"), "0x500000003");
        assert!(
            Zxid::new(4, u32::MAX) < Zxid::new(5, 1),
            "a later epoch orders after"
        );
    }

    #[test]
    fn zxid_goes_to_and_from_the_wire_as_a_long() {
        let z = Zxid::new(7, 9);
        assert_eq!(Zxid::from_wire(z.to_wire()), z);
        assert_eq!(z.to_wire(), 0x7_0000_0009);
        assert_eq!(Zxid::from_wire(-1), Zxid::ZERO, "ZooKeeper's 'no zxid'");
    }
}
