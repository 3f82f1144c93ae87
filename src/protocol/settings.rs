//! The redrive policy: a multi-word live setting, changed by any participant, read by every
//! receive, in two buffers.
//!
//! `current = [version:63][buffer:1]` names the buffer readers use. A writer takes the
//! owner-tagged `writer` claim (taken over only from a proven-dead owner), writes the *other*
//! buffer, then publishes it by bumping `current`. A writer that dies mid-write leaves only the
//! unpublished buffer half-written; the next writer takes the claim over and rewrites it.
//! Readers never wait: they read the current buffer between two loads of `current` and retry
//! if it changed (a buffer is rewritten only after `current` moved away from it).
#![cfg_attr(feature = "loom", allow(unreachable_pub, missing_docs))]

use super::Owner;
use super::{Arena, Env, Fault, PResult};
use crate::layout::{RedrivePolicyWords, MAX_REDRIVE_PATH};
use crate::sync::{fence, Ordering};

/// A redrive policy as stored: `maxReceiveCount` (0 = none) and the dead-letter queue path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    /// Version of the policy (bumped by each change); lets readers cache what it names.
    pub version: u64,
    /// `maxReceiveCount`, 0 when the queue has no redrive policy.
    pub max_receive_count: u32,
    /// Path length in bytes.
    pub path_len: usize,
    /// Path bytes (the first `path_len`).
    pub path: [u8; MAX_REDRIVE_PATH],
}

/// Bound on reader retries and writer waits before declaring the words corrupted.
const MAX_ROUNDS: u32 = 1 << 20;

/// The policy's version word: it changes with every write, so a reader that saw no policy
/// under one value need not [`read`] again until it changes.
pub fn current(a: &Arena<'_>) -> u64 {
    // Acquire: SYNC POINT(settings-publish), as in `read` (which validates the whole policy).
    a.hdr.redrive.current.load(Ordering::Acquire)
}

/// Reads the current policy (lock-free: retries only while a writer publishes).
pub fn read(a: &Arena<'_>) -> PResult<Redrive> {
    let ctl = &a.hdr.redrive;
    for _ in 0..MAX_ROUNDS {
        // SYNC POINT(settings-publish): Acquire pairs with the writer's Release CAS that
        // published this buffer.
        let c = ctl.current.load(Ordering::Acquire);
        let b = &ctl.buffers[(c & 1) as usize];
        // Relaxed loads, validated by the version re-check below.
        let max = b.max_receive_count.load(Ordering::Relaxed);
        let len = b.path_len.load(Ordering::Relaxed) as usize;
        let mut path = [0u8; MAX_REDRIVE_PATH];
        for (k, w) in b.path.iter().enumerate() {
            path[8 * k..8 * k + 8].copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        // SYNC POINT(settings-publish): an Acquire fence before the re-check pairs with the
        // writer's Release fence before its buffer stores: if we read any of them, we see
        // `current` moved.
        fence(Ordering::Acquire);
        if ctl.current.load(Ordering::Relaxed) != c {
            continue;
        }
        if max > 1000 || len > MAX_REDRIVE_PATH || (max > 0 && len == 0) {
            return Err(Fault::Corrupted("redrive policy out of range"));
        }
        return Ok(Redrive {
            version: c >> 1,
            max_receive_count: max as u32,
            path_len: len,
            path,
        });
    }
    Err(Fault::Corrupted("redrive policy never stable"))
}

/// Replaces the policy (`max_receive_count` 0 removes it). The caller validated the values.
pub fn write(
    a: &Arena<'_>,
    env: &dyn Env,
    me: Owner,
    max_receive_count: u32,
    path: &[u8],
) -> PResult<()> {
    if path.len() > MAX_REDRIVE_PATH {
        return Err(Fault::Corrupted("redrive path too long"));
    }
    let ctl = &a.hdr.redrive;
    super::group::home_claim_wait(a, env, &ctl.writer, me)?;
    crash_point!();
    // Acquire: the previous writer's publication (and its buffer) happen before our writes.
    let c = ctl.current.load(Ordering::Acquire);
    let b: &RedrivePolicyWords = &ctl.buffers[((c & 1) ^ 1) as usize];
    // SYNC POINT(settings-publish): readers that see any store below see `current` changed
    // (their Acquire fence pairs with this one).
    fence(Ordering::Release);
    // Relaxed stores: published by the Release CAS of `current`.
    b.max_receive_count
        .store(u64::from(max_receive_count), Ordering::Relaxed);
    b.path_len.store(path.len() as u64, Ordering::Relaxed);
    crash_point!();
    for (k, w) in b.path.iter().enumerate() {
        let mut bytes = [0u8; 8];
        let lo = (8 * k).min(path.len());
        let hi = (8 * k + 8).min(path.len());
        bytes[..hi - lo].copy_from_slice(&path[lo..hi]);
        w.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
    }
    crash_point!();
    let next = ((c >> 1).wrapping_add(1) << 1) | ((c & 1) ^ 1);
    // SYNC POINT(settings-publish): Release publishes the buffer to readers' Acquire loads.
    // Only the writer-claim holder changes `current`, so this succeeds unless the words were
    // corrupted.
    let r = ctl
        .current
        .compare_exchange(c, next, Ordering::AcqRel, Ordering::Relaxed);
    crash_point!();
    super::group::release_plain(&ctl.writer, me.bits());
    r.map(|_| ())
        .map_err(|_| Fault::Corrupted("redrive policy changed without its claim"))
}
