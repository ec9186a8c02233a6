//! One link's bounded outbound queue.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::Notify;

use super::{LinkCmd, QUEUE_BYTES_MAX, WRITE_BATCH_MAX};

/// One link's outbound queue, shared by the core (which pushes without
/// waiting) and the link's task (which drains it into the socket).
pub(super) struct Outbox {
    pub(super) state: Mutex<OutboxState>,
    pub(super) wake: Notify,
}

#[derive(Default)]
pub(super) struct OutboxState {
    pub(super) queue: VecDeque<LinkCmd>,
    /// The sum of `size()` over `queue`.
    pub(super) bytes: usize,
    /// The peer did not drain the queue: the link must be reset.
    pub(super) overflowed: bool,
    /// The [`Links`] are gone: the link's task ends.
    pub(super) closed: bool,
}

/// What the link's task takes from its queue.
pub(super) enum Take {
    Cmds(Vec<LinkCmd>),
    Overflowed,
    Closed,
}

impl Outbox {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, OutboxState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn push(&self, cmd: LinkCmd) {
        let mut s = self.lock();
        if s.overflowed || s.closed {
            return;
        }
        if s.bytes >= QUEUE_BYTES_MAX {
            s.queue.clear();
            s.bytes = 0;
            s.overflowed = true;
        } else {
            s.bytes += cmd.size();
            s.queue.push_back(cmd);
        }
        drop(s);
        self.wake.notify_one();
    }

    /// Takes commands worth up to [`WRITE_BATCH_MAX`] bytes (at least one).
    pub(super) fn take(&self) -> Take {
        let mut s = self.lock();
        if s.closed {
            return Take::Closed;
        }
        if s.overflowed {
            return Take::Overflowed;
        }
        let mut cmds = Vec::new();
        let mut bytes = 0;
        while bytes < WRITE_BATCH_MAX {
            let Some(c) = s.queue.pop_front() else { break };
            let n = c.size();
            bytes += n;
            s.bytes -= n;
            cmds.push(c);
        }
        Take::Cmds(cmds)
    }

    /// Drops what is queued (the link it was for is gone); returns false
    /// once the [`Links`] are gone.
    pub(super) fn discard(&self) -> bool {
        let mut s = self.lock();
        s.queue.clear();
        s.bytes = 0;
        s.overflowed = false;
        !s.closed
    }

    pub(super) fn is_overflowed(&self) -> bool {
        self.lock().overflowed
    }
}
