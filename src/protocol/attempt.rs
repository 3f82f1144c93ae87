//! ReceiveRequestAttemptId records (R11): which messages a receive returned, under which
//! receipt, so that a retry with the same attempt id returns the same messages and receipt
//! handles if none of them changed since.
//!
//! A record lives in a window of `WINDOW` entries from its home `hash & (A - 1)`. A writer
//! CASes a reusable entry (FREE, older than `LIFETIME_MS`, or WRITING by a dead owner) to
//! WRITING(me) with its incarnation bumped, writes the fields after a Release fence, and
//! publishes DONE (Release). Readers validate with a seqlock (Acquire state, Relaxed fields,
//! Acquire fence, state unchanged). A writer that dies leaves a WRITING entry that the next
//! writer takes over; a record that finds no entry is simply not kept (the retry is then a
//! fresh receive, as SQS does for an attempt id it no longer knows).
#![cfg_attr(feature = "loom", allow(unreachable_pub, missing_docs))]

use super::words::attempt::{inc, kind, pack, pack_meta, unpack_meta, DONE, FREE, WRITING};
use super::Owner;
use super::{Arena, Env};
use crate::layout::{AttemptEntry, MAX_ID_LEN};
use crate::sync::{fence, seqlock_still, Ordering};

/// How long a record answers retries (R11: 5 minutes).
pub const LIFETIME_MS: u64 = 5 * 60 * 1000;
/// Entries searched from a record's home entry.
pub const WINDOW: usize = 8;
/// Most messages per record (one receive).
pub const MAX_MESSAGES: usize = 10;

/// A record: the receive's messages as `(node ref, vis word after the receive)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Visibility timeout of the receive, ms.
    pub vt_ms: u64,
    /// Number of messages.
    pub count: usize,
    /// The messages, as [`message_ref`]s.
    pub refs: [u64; MAX_MESSAGES],
    /// Each message's `vis` word as the receive left it (epoch and deadline).
    pub vis: [u64; MAX_MESSAGES],
}

/// A record's reference to a message: `[member:4][inc:28][idx:32]`, its slot, the low 28 bits
/// of the slot's incarnation and its member in the slot's pack (layout 22; 0: a slot of its
/// own). A replay also compares the message's whole state word (its epoch and its deadline in
/// ms), so 28 bits of incarnation are ample to tell a reused slot.
pub fn message_ref(idx: u32, inc: u32, member: u8) -> u64 {
    (u64::from(member & 0xF) << 60) | (u64::from(inc & INC_MASK) << 32) | u64::from(idx)
}

/// `(idx, inc & INC_MASK, member)` of a [`message_ref`].
pub fn ref_parts(r: u64) -> (u32, u32, u8) {
    (r as u32, ((r >> 32) as u32) & INC_MASK, (r >> 60) as u8)
}

/// The bits of an incarnation a [`message_ref`] keeps.
pub const INC_MASK: u32 = (1 << 28) - 1;

fn window<'a>(a: &Arena<'a>, hash: u64) -> impl Iterator<Item = &'a AttemptEntry> {
    let t: &'a [AttemptEntry] = a.attempts;
    let n = t.len();
    let home = if n == 0 { 0 } else { (hash as usize) & (n - 1) };
    (0..WINDOW.min(n)).map(move |k| &t[(home + k) & (n - 1)])
}

fn id_words(id: &[u8]) -> [u64; MAX_ID_LEN / 8] {
    let mut w = [0u64; MAX_ID_LEN / 8];
    for (k, chunk) in id.chunks(8).take(MAX_ID_LEN / 8).enumerate() {
        w[k] = super::words::text_word(chunk);
    }
    w
}

/// Finds the live record of attempt id `id` (keyed hash `hash`).
pub fn find(a: &Arena<'_>, now: u64, hash: u64, id: &[u8]) -> Option<Record> {
    let want = id_words(id);
    for e in window(a, hash) {
        // SYNC POINT(attempt-seqlock): Acquire pairs with the writer's Release store of DONE.
        let st = e.state.load(Ordering::Acquire);
        if kind(st) != DONE {
            continue;
        }
        // Relaxed field loads, validated by the state re-check after the Acquire fence.
        let created = e.created.load(Ordering::Relaxed);
        let meta = e.meta.load(Ordering::Relaxed);
        let (count, id_len, vt_ms) = unpack_meta(meta);
        let same = e.hash.load(Ordering::Relaxed) == hash
            && id_len == id.len()
            && e.id
                .iter()
                .zip(want.iter())
                .all(|(w, x)| w.load(Ordering::Relaxed) == *x);
        let mut rec = Record {
            vt_ms,
            count: count.min(MAX_MESSAGES),
            refs: [0; MAX_MESSAGES],
            vis: [0; MAX_MESSAGES],
        };
        for k in 0..rec.count {
            rec.refs[k] = e.refs[k].load(Ordering::Relaxed);
            rec.vis[k] = e.vis[k].load(Ordering::Relaxed);
        }
        // SYNC POINT(attempt-seqlock): pairs with the writer's Release fence before its field
        // writes: if we read any of them, we see the state changed.
        if !seqlock_still(&e.state, st) {
            continue; // rewritten while we read: not a record we can trust
        }
        if same && count <= MAX_MESSAGES && now < created.saturating_add(LIFETIME_MS) {
            return Some(rec);
        }
    }
    None
}

/// Records (or replaces) attempt id `id`'s messages. Returns whether an entry was found.
pub fn record(a: &Arena<'_>, env: &dyn Env, me: Owner, hash: u64, id: &[u8], rec: &Record) -> bool {
    let now = env.now_ms();
    let want = id_words(id);
    // Prefer the entry that already holds this id (a replay refreshing its deadlines).
    let mut target = None;
    for e in window(a, hash) {
        // Acquire: as in `find`.
        let st = e.state.load(Ordering::Acquire);
        let reusable = match kind(st) {
            FREE => true,
            // Relaxed: a hint; the CAS below decides.
            DONE => {
                let mine = e.hash.load(Ordering::Relaxed) == hash
                    && e.id
                        .iter()
                        .zip(want.iter())
                        .all(|(w, x)| w.load(Ordering::Relaxed) == *x);
                if mine {
                    target = Some((e, st));
                    break;
                }
                now >= e
                    .created
                    .load(Ordering::Relaxed)
                    .saturating_add(LIFETIME_MS)
            }
            WRITING => a.owner_dead(env, Owner::of_word(st)),
            _ => true, // unknown kind: corrupted, reclaim
        };
        if reusable && target.is_none() {
            target = Some((e, st));
        }
    }
    let Some((e, st)) = target else {
        return false;
    };
    let next = inc(st).wrapping_add(1);
    // Acquire: orders our writes after the previous record's readers' validation loads.
    if e.state
        .compare_exchange(
            st,
            pack(next, WRITING, me),
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return false; // another writer took it: this retry window is best effort
    }
    crash_point!(false);
    // SYNC POINT(attempt-seqlock): readers that see any store below see the state changed.
    fence(Ordering::Release);
    // Relaxed stores: published by the Release store of DONE.
    e.hash.store(hash, Ordering::Relaxed);
    e.created.store(now, Ordering::Relaxed);
    let count = rec.count.min(MAX_MESSAGES);
    e.meta
        .store(pack_meta(count, id.len(), rec.vt_ms), Ordering::Relaxed);
    for (w, x) in e.id.iter().zip(want.iter()) {
        w.store(*x, Ordering::Relaxed);
    }
    for k in 0..count {
        e.refs[k].store(rec.refs[k], Ordering::Relaxed);
        e.vis[k].store(rec.vis[k], Ordering::Relaxed);
    }
    crash_point!(false);
    // SYNC POINT(attempt-seqlock): Release publishes the fields to readers' Acquire loads.
    e.state
        .store(pack(next, DONE, Owner::NOBODY), Ordering::Release);
    true
}
