//! The live time settings of an operation, read once, and the one classification of a published
//! message (expired, in flight, delayed, visible) that take, status, counts and inspection share.

use super::{Arena, Env};
use crate::sync::Ordering;

/// The longest a message may stay in flight after a receive (H6: 12 hours).
pub const MAX_VISIBILITY_MS: u64 = 12 * 3600 * 1000;

/// The live time settings of an arena, read once per operation.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Arena time now, ms.
    pub now: u64,
    /// Queue delay, ms (L1).
    pub delay: u64,
    /// Retention period, ms (T1).
    pub retention: u64,
}

impl Times {
    /// Reads the settings (Relaxed: live settings; an operation racing with a change may
    /// apply either value).
    pub fn load(a: &Arena<'_>, env: &dyn Env) -> Times {
        Times {
            now: env.now_ms(),
            delay: a.hdr.delay_ms.load(Ordering::Relaxed),
            retention: a.hdr.retention_ms.load(Ordering::Relaxed).max(1),
        }
    }
    /// Whether a message enqueued at `sent` is past its retention period (T1, T3).
    pub fn expired(&self, sent: u64) -> bool {
        self.now.saturating_sub(sent) >= self.retention
    }
    /// The arena time at which a message enqueued at `sent` expires.
    pub fn expiry(&self, sent: u64) -> u64 {
        sent.saturating_add(self.retention)
    }
    /// Whether a never-received message enqueued at `sent` is still delayed (L1). Without a
    /// delay nothing is: a receiver whose instant was read before the sender stamped `sent`
    /// (each operation reads the clock once) must not take a message that is published for a
    /// delayed one, which nobody would hint again until a periodic sweep.
    pub fn delayed(&self, sent: u64) -> bool {
        self.delay > 0 && self.now < sent.saturating_add(self.delay)
    }
    /// Where a published message enqueued at `sent`, with deadline field `d` (0: never
    /// received), stands now. Expiry comes first: an expired message is gone whatever its
    /// deadline (T1).
    pub fn standing(&self, sent: u64, d: u64) -> Standing {
        if self.expired(sent) {
            Standing::Expired
        } else if d > self.now {
            Standing::InFlight
        } else if d == 0 && self.delayed(sent) {
            Standing::Delayed
        } else {
            Standing::Visible
        }
    }
}

/// Where a published message stands at one instant ([`Times::standing`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Past its retention period (T1): gone, removed by the next walk that passes it.
    Expired,
    /// In flight: its visibility deadline is ahead (R3 locks its group from it on).
    InFlight,
    /// Never received and within the queue delay (L1).
    Delayed,
    /// Receivable (once the messages before it in its group are gone).
    Visible,
}
