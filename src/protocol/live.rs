//! The live settings: single-word settings any participant may change while the queue is in
//! use (`SetQueueAttributes`), each read once by the operations that use it; the facts fixed at
//! creation that the API shows; and the test clock.
//!
//! A single-word setting needs no protocol to be read whole: it is one aligned word, stored and
//! loaded Relaxed, and an operation racing with its change uses either value (as SQS's own
//! eventual consistency allows). What needs ordering is the *consequence* of a change of delay
//! or retention, or of a move of the test clock: messages may be ready, or gone, at other times
//! than every participant planned. [`reschedule`] asks the next receiver for a full sweep and
//! wakes every sleeper to recompute its sleep (SYNC POINT(reschedule)): the changer's Release
//! store of `next_expiry = 0` after its setting stores, against the sweeper's Acquire load of
//! `next_expiry` (`sweep::maybe_sweep`) before it reads the settings; then a Release bump of the
//! doorbell against a sleeper's Acquire load. A changer that stops between its stores and the
//! request leaves the change in place and no sweep asked for: the periodic sweep
//! (`sweep::SWEEP_PERIOD_MS`) finds what became ready, and sleepers wake within their sleep
//! bound. Loom: `a_setting_change_wakes_a_sleeper_or_is_seen`,
//! `a_changer_stopped_mid_change_delays_nothing_past_the_sweep_period`.
#![cfg_attr(feature = "loom", allow(unreachable_pub, missing_docs))]

use super::{Arena, Env};
use crate::sync::Ordering;

/// The single-word live settings, as read (Relaxed: each a value on its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Live {
    /// `MaximumMessageSize`, bytes.
    pub max_message_size: u64,
    /// Default visibility timeout, ms.
    pub visibility_timeout_ms: u64,
    /// Default receive wait, ms.
    pub receive_wait_ms: u64,
    /// Queue delay, ms (L1).
    pub delay_ms: u64,
    /// Retention period, ms (T1).
    pub retention_ms: u64,
    /// Content-based deduplication (D5).
    pub content_based_dedup: bool,
}

/// A change of live settings: `None` leaves a setting as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Change {
    /// New `MaximumMessageSize`, bytes.
    pub max_message_size: Option<u64>,
    /// New default visibility timeout, ms.
    pub visibility_timeout_ms: Option<u64>,
    /// New default receive wait, ms.
    pub receive_wait_ms: Option<u64>,
    /// New queue delay, ms.
    pub delay_ms: Option<u64>,
    /// New retention period, ms.
    pub retention_ms: Option<u64>,
    /// New content-based deduplication.
    pub content_based_dedup: Option<bool>,
}

/// Reads every live setting.
pub fn read(a: &Arena<'_>) -> Live {
    let h = a.hdr;
    // Relaxed: single-word live settings (module doc); an operation racing a change may use
    // either value.
    let r = Ordering::Relaxed;
    Live {
        max_message_size: h.max_message_size.load(r),
        visibility_timeout_ms: h.visibility_timeout_ms.load(r),
        receive_wait_ms: h.receive_wait_ms.load(r),
        delay_ms: h.delay_ms.load(r),
        retention_ms: h.retention_ms.load(r),
        content_based_dedup: h.content_based_dedup.load(r) != 0,
    }
}

/// The default visibility timeout, ms (one load: every receive without its own reads it).
pub fn visibility_timeout_ms(a: &Arena<'_>) -> u64 {
    // Relaxed: a single-word live setting (module doc).
    a.hdr.visibility_timeout_ms.load(Ordering::Relaxed)
}

/// The default receive wait, ms.
pub fn receive_wait_ms(a: &Arena<'_>) -> u64 {
    // Relaxed: a single-word live setting (module doc).
    a.hdr.receive_wait_ms.load(Ordering::Relaxed)
}

/// `MaximumMessageSize`, bytes.
pub fn max_message_size(a: &Arena<'_>) -> u64 {
    // Relaxed: a single-word live setting (module doc).
    a.hdr.max_message_size.load(Ordering::Relaxed)
}

/// Whether content-based deduplication is on (D5).
pub fn content_based_dedup(a: &Arena<'_>) -> bool {
    // Relaxed: a single-word live setting (module doc).
    a.hdr.content_based_dedup.load(Ordering::Relaxed) != 0
}

/// The in-flight limit (R8), fixed at creation.
pub fn max_in_flight(a: &Arena<'_>) -> u64 {
    // Relaxed: fixed at creation, published by SYNC POINT(arena-ready).
    a.hdr.max_in_flight.load(Ordering::Relaxed)
}

/// Applies `c`: each setting is one Relaxed store; a change of delay or retention then
/// [`reschedule`]s.
pub fn change(a: &Arena<'_>, env: &dyn Env, c: &Change) {
    let h = a.hdr;
    // Relaxed stores: single-word live settings (module doc); the Release store in
    // `reschedule` publishes them to the sweeper that acts on the change.
    let r = Ordering::Relaxed;
    if let Some(v) = c.max_message_size {
        h.max_message_size.store(v, r);
    }
    if let Some(v) = c.receive_wait_ms {
        h.receive_wait_ms.store(v, r);
    }
    if let Some(v) = c.visibility_timeout_ms {
        h.visibility_timeout_ms.store(v, r);
    }
    if let Some(v) = c.delay_ms {
        h.delay_ms.store(v, r);
    }
    if let Some(v) = c.retention_ms {
        h.retention_ms.store(v, r);
    }
    if let Some(on) = c.content_based_dedup {
        h.content_based_dedup.store(u64::from(on), r);
    }
    crash_point!(());
    if c.delay_ms.is_some() || c.retention_ms.is_some() {
        reschedule(a, env);
    }
}

/// Notes a change of the settings (or of the redrive policy) at the queue's wall-clock time:
/// the last-modified time ([`modified_wall_ms`]) becomes it if it is later.
pub fn note_modified(a: &Arena<'_>, env: &dyn Env) {
    // Relaxed: a timestamp for display (`LastModifiedTimestamp`), synchronising nothing;
    // fetch_max so that of two racing changes the later time stays.
    a.hdr
        .modified_wall_ms
        .fetch_max(env.wall_ms(), Ordering::Relaxed);
}

/// Wall-clock time of the last change of the settings ([`note_modified`]), ms since the Unix
/// epoch; 0 if none since creation.
pub fn modified_wall_ms(a: &Arena<'_>) -> u64 {
    // Relaxed: a timestamp for display.
    a.hdr.modified_wall_ms.load(Ordering::Relaxed)
}

/// Messages may be ready (or gone) at other times now: asks the next receiver for a full
/// sweep and wakes every sleeper to recompute its sleep (module doc).
pub fn reschedule(a: &Arena<'_>, env: &dyn Env) {
    let h = a.hdr;
    // SYNC POINT(reschedule): Release, after the changer's stores, pairs with the sweeper's
    // Acquire load of `next_expiry` (`sweep::sweep_if_due`) before it reads the settings.
    h.next_expiry.0.store(0, Ordering::Release);
    crash_point!(());
    // SYNC POINT(reschedule): Release pairs with a sleeper's Acquire load of the doorbell
    // (`doorbell::begin_wait`, `doorbell::rung`): a woken sleeper sees the request.
    h.wake.0.doorbell.fetch_add(1, Ordering::Release);
    env.wake_all(&h.wake.0.doorbell);
}

/// The earliest deadline that may make a group ready without an event, ms (0: a full sweep
/// is asked for). A sleep bound only.
pub fn next_expiry(a: &Arena<'_>) -> u64 {
    // Relaxed: a sleep bound only; the sweep itself loads it Acquire.
    a.hdr.next_expiry.0.load(Ordering::Relaxed)
}

/// The test clock's arena time, ms (at least 1: 0 means "never received" in message words).
pub fn test_now(a: &Arena<'_>) -> u64 {
    // Acquire: pairs with `advance_test_clock`'s Release increment, so what was done before
    // the clock moved is seen at the new time.
    a.hdr.test_now.0.load(Ordering::Acquire).max(1)
}

/// Moves the test clock `step` ms forward, then [`reschedule`]s (deadlines may have passed).
/// Refused (`Err(limit)`) past `limit` ms of queue time.
pub fn advance_test_clock(a: &Arena<'_>, env: &dyn Env, step: u64, limit: u64) -> Result<(), u64> {
    let h = a.hdr;
    // Relaxed: a bound check only (the fetch_add below is the move).
    if h.test_now.0.load(Ordering::Relaxed).saturating_add(step) > limit {
        return Err(limit);
    }
    // Release: pairs with `test_now`'s Acquire load.
    h.test_now.0.fetch_add(step, Ordering::Release);
    crash_point!(Ok(()));
    reschedule(a, env);
    Ok(())
}

/// What a queue's creation fixed that its handles keep: the keys of its id hashes, its nonce
/// (in message ids and receipt handles), its creation's wall-clock time and the permission
/// bits its creator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The keyed hash's keys (group and dedup ids).
    pub keys: (u64, u64),
    /// The queue's nonce.
    pub nonce: u64,
    /// Wall-clock time of the creation, ms since the Unix epoch.
    pub created_wall_ms: u64,
    /// The permission bits the creator asked for.
    pub mode: u32,
}

/// Reads the creation's [`Identity`]. Call only on a header `view::check` accepted.
pub fn identity(a: &Arena<'_>) -> Identity {
    let h = a.hdr;
    // Relaxed: fixed at creation, published by SYNC POINT(arena-ready) (checked by the open).
    let r = Ordering::Relaxed;
    Identity {
        keys: (h.hash_k0.load(r), h.hash_k1.load(r)),
        nonce: h.nonce.load(r),
        created_wall_ms: h.created_wall_ms.load(r),
        mode: (h.mode.load(r) & 0o7777) as u32,
    }
}

/// What happened to the dedup window and the quarantine: statistics for display.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// A full dedup table refuses sends (`true`) or shortens the window (`false`).
    pub dedup_refuses: bool,
    /// Dedup ids forgotten before their interval ended.
    pub dedup_evictions: u64,
    /// Arena time of the last eviction, ms.
    pub last_eviction_ms: u64,
    /// The age of the id the last eviction forgot, ms.
    pub last_eviction_age_ms: u64,
    /// Messages quarantined.
    pub quarantined_messages: u64,
    /// Groups quarantined.
    pub quarantined_groups: u64,
    /// Group entries in use: ACTIVE (kept idle ones included, layout 19) or INSERTING, as `active_groups`
    /// counts them for the capacity (not the groups with messages: [`super::kept::count_active`]).
    pub group_entries_in_use: u64,
}

/// Reads the [`Stats`].
pub fn stats(a: &Arena<'_>) -> Stats {
    let h = a.hdr;
    // Relaxed: statistics for display; each counter is one word.
    let r = Ordering::Relaxed;
    let ev = &h.dedup_evict.0;
    Stats {
        dedup_refuses: h.dedup_overflow.load(r) == 1,
        dedup_evictions: ev.count.load(r),
        last_eviction_ms: ev.last_ms.load(r),
        last_eviction_age_ms: ev.last_age_ms.load(r),
        quarantined_messages: h.quarantine.0.messages.load(r),
        quarantined_groups: h.quarantine.0.groups.load(r),
        group_entries_in_use: h.active_groups.0.load(r),
    }
}
