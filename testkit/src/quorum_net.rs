//! The network between ensemble members, through fault proxies: with
//! [`ServerOptions::quorum_proxies`](crate::ServerOptions::quorum_proxies)
//! every member reaches every other member's quorum and election ports
//! through a [`Proxy`] of its own, so a test can cut a member off silently
//! (connections stay open, no byte passes: only timeouts notice), as a
//! dropped-packet partition does, and heal it.

use std::net::SocketAddr;

use crate::Proxy;

/// One direction of one pair's traffic: what member `from` dials to reach
/// member `to` (0-based indexes).
struct Link {
    from: usize,
    to: usize,
    proxy: Proxy,
}

/// Every proxy between the members of one ensemble.
#[derive(Default)]
pub struct QuorumNet {
    links: Vec<Link>,
}

impl QuorumNet {
    /// A proxy for `from` dialing `target`, a port of member `to`; returns
    /// the address `from` must dial instead.
    pub(crate) fn add(
        &mut self,
        from: usize,
        to: usize,
        target: SocketAddr,
    ) -> std::io::Result<SocketAddr> {
        let proxy = Proxy::start(target)?;
        let addr = proxy.addr();
        self.links.push(Link { from, to, proxy });
        Ok(addr)
    }

    /// Member `i` is cut off from every other member, silently: its links
    /// stay open and carry nothing, either way. Its clients still reach it.
    pub fn isolate(&self, i: usize) {
        for l in self.links.iter().filter(|l| l.from == i || l.to == i) {
            l.proxy.blackhole();
        }
    }

    /// Every link carries bytes again (what was held goes through).
    pub fn heal(&self) {
        for l in &self.links {
            l.proxy.restore();
        }
    }
}
