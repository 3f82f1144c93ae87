//! The queue functions: create, open, close, unlink, send, receive, delete, visibility,
//! purge, recover, attributes, counters, settings and redrive (the batches are in `batch`).

use core::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shmfifo_core as core_api;
use shmfifo_core::{
    DedupOverflow, Deduplication, Error, Queue, QueueConfig, ReceiveOptions, RedriveOptions,
};

use crate::{boundary::*, config::*, error::*, message::*};

/// An open queue. Thread-safe: one handle may be used by many threads at once. Close it with
/// [`shmfifo_queue_close`].
pub struct shmfifo_queue {
    pub(crate) q: Queue,
}

/// Reads a queue pointer.
///
/// # Safety
/// `q` must be NULL or a live handle from `shmfifo_queue_create`/`open`.
pub(crate) unsafe fn queue<'a>(q: *const shmfifo_queue) -> R<&'a Queue> {
    // SAFETY: the caller guarantees a live handle or NULL.
    unsafe { q.as_ref() }
        .map(|h| &h.q)
        .ok_or_else(|| null("queue"))
}

/// Creates the queue `name` under `/dev/shm` (a name) or at a path (`name` containing a `/`),
/// exclusively, with `config` (NULL: the defaults). On success `*out` is the new handle. A name
/// is 1–200 of `A-Z a-z 0-9 _ . -` (`SHMFIFO_INVALID_QUEUE_NAME` otherwise); a path's directory
/// must exist (`SHMFIFO_QUEUE_DOES_NOT_EXIST`, its text "no directory"); a file already there
/// is `SHMFIFO_QUEUE_NAME_EXISTS` (a queue's: open it, or unlink it first; any other file is
/// never replaced, nor removed by `shmfifo_queue_unlink`, which answers
/// `SHMFIFO_NOT_AN_ARENA`).
///
/// # Safety
/// `name` must be a NUL-terminated string; `config` NULL or valid (its `dead_letter_queue`
/// view too); `out` valid for writing.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_create(
    name: *const c_char,
    config: *const shmfifo_config,
    out: *mut *mut shmfifo_queue,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let out = unsafe { out_ptr(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: the caller guarantees a NUL-terminated string.
        let name = unsafe { cstr(name, "name") }?;
        // SAFETY: NULL or valid, per the contract.
        let cfg = match unsafe { config.as_ref() } {
            // SAFETY: its views are valid, per the contract.
            Some(c) => unsafe { queue_config(c) }?,
            None => QueueConfig::new(),
        };
        let q = if name.contains('/') {
            Queue::create_at(name, &cfg)
        } else {
            Queue::create(name, &cfg)
        }
        .map_err(c_setting)?;
        *out = Box::into_raw(Box::new(shmfifo_queue { q }));
        Ok(())
    })
}

/// Opens the queue `name` (under `/dev/shm`, or a path when it contains a `/`; a name is 1–200
/// of `A-Z a-z 0-9 _ . -`), `SHMFIFO_QUEUE_DOES_NOT_EXIST` where there is none. It never
/// waits: creators name a queue only once it is complete, so a file there that carries no
/// arena (empty, zero-filled, or any file that is not a queue) gives `SHMFIFO_NOT_AN_ARENA`
/// at once, and an unfinished arena of an older build `SHMFIFO_NOT_READY`.
///
/// # Safety
/// `name` must be a NUL-terminated string; `out` valid for writing.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_open(
    name: *const c_char,
    out: *mut *mut shmfifo_queue,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let out = unsafe { out_ptr(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: the caller guarantees a NUL-terminated string.
        let name = unsafe { cstr(name, "name") }?;
        let q = if name.contains('/') {
            Queue::open_at(name)
        } else {
            Queue::open(name)
        }?;
        *out = Box::into_raw(Box::new(shmfifo_queue { q }));
        Ok(())
    })
}

/// Closes a handle (NULL is ignored). Messages it holds in flight return at their visibility
/// timeout.
///
/// # Safety
/// `q` must be NULL or a live handle not used by any other thread during or after this call.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_close(q: *mut shmfifo_queue) {
    if !q.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the caller hands the handle back; it came from Box::into_raw.
            drop(unsafe { Box::from_raw(q) });
        }));
    }
}

/// Removes the queue's file (a name under `/dev/shm`, or a path with a `/`). Open handles keep
/// working; the memory is freed when the last one closes.
///
/// # Safety
/// `name` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_unlink(name: *const c_char) -> shmfifo_result {
    guard(|| {
        // SAFETY: the caller guarantees a NUL-terminated string.
        let name = unsafe { cstr(name, "name") }?;
        if name.contains('/') {
            Queue::unlink_at(name)?;
        } else {
            Queue::unlink(name)?;
        }
        Ok(())
    })
}

/// Sends one message. `out` may be NULL.
///
/// # Safety
/// `q` a live handle; `msg` valid (see [`shmfifo_send_message`]); `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_send(
    q: *const shmfifo_queue,
    msg: *const shmfifo_send_message,
    out: *mut shmfifo_send_result,
) -> shmfifo_result {
    // SAFETY: the caller's contract is this function's.
    unsafe { send_one(q, msg, 0, out) }
}

/// [`shmfifo_send`] and [`shmfifo_send_timeout`]: converts, sends waiting up to `timeout_ms`
/// for room (0: not at all), writes the result.
///
/// # Safety
/// As [`shmfifo_send`].
unsafe fn send_one(
    q: *const shmfifo_queue,
    msg: *const shmfifo_send_message,
    timeout_ms: u64,
    out: *mut shmfifo_send_result,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let m = unsafe { msg.as_ref() }.ok_or_else(|| null("msg"))?;
        let mut attrs = Vec::new();
        let binary = q.body_mode() == shmfifo_core::BodyMode::Binary;
        // SAFETY: per the contract.
        let m = unsafe { message(m, &mut attrs, q.maximum_message_size() as usize, binary) }?;
        let r = q.send_timeout(&m, std::time::Duration::from_millis(timeout_ms))?;
        // SAFETY: NULL or writable, per the contract.
        if let Some(o) = unsafe { out.as_mut() } {
            *o = send_result(&r);
        }
        Ok(())
    })
}

/// Sends one message like [`shmfifo_send`], but when its size class is full waits up to
/// `timeout_ms` milliseconds for a slot to free (woken by the process that frees one: a
/// delete frees the slot of the message before it in its group, each group with messages
/// holding one consumed slot as its list head; see `max_messages`), then
/// fails with `SHMFIFO_SIZE_CLASS_FULL`. Every other error returns at once. A timeout of 0 is
/// [`shmfifo_send`]. `out` may be NULL.
///
/// # Safety
/// `q` a live handle; `msg` valid (see [`shmfifo_send_message`]); `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_send_timeout(
    q: *const shmfifo_queue,
    msg: *const shmfifo_send_message,
    timeout_ms: u64,
    out: *mut shmfifo_send_result,
) -> shmfifo_result {
    // SAFETY: the caller's contract is this function's.
    unsafe { send_one(q, msg, timeout_ms, out) }
}

/// Receives up to `opts->max_messages` messages (`opts` NULL: the defaults) into `buf`,
/// writing views to `out[0..*count]`. A bad option (`max_messages` outside 1–10, a visibility
/// timeout over 12 h, a wait over 20 s) is `SHMFIFO_INVALID_PARAMETER_VALUE` first; then `out`
/// must have room for `max_messages` entries (`out_cap`), else `SHMFIFO_BUFFER_TOO_SMALL`
/// before anything is received. Waits at most the
/// wait time.
///
/// # Safety
/// `q` a live handle; `buf` a live buffer not used by another thread; `out` `out_cap`
/// writable entries; `count` writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_receive(
    q: *const shmfifo_queue,
    opts: *const shmfifo_receive_options,
    buf: *mut shmfifo_receive_buffer,
    out: *mut shmfifo_message,
    out_cap: usize,
    count: *mut usize,
) -> shmfifo_result {
    // SAFETY: the caller's contract is this function's.
    unsafe { receive(q, opts, None, buf, out, out_cap, count) }
}

/// [`shmfifo_receive`] whose wait another thread, or a signal handler, can end: once
/// `*cancel` is nonzero (looked at every 100 ms at least, in the waiting thread: no wake-up
/// call needed) the call returns `SHMFIFO_OK` with `*count` 0, having taken nothing after it
/// saw the flag (a call that returns messages returns them whole). Set the flag with an atomic
/// store: C11 `atomic_store_explicit(&flag, 1, memory_order_relaxed)` on an `atomic_int`
/// (lock-free, so also from a signal handler, on any thread), or
/// `__atomic_store_n(&flag, 1, __ATOMIC_RELAXED)`; a handler's plain store to a
/// `volatile sig_atomic_t` (an `int32_t` on Linux) works on Linux's targets, but C promises
/// it only for a handler on the waiting thread. A flag already nonzero at the call makes it a
/// receive without a wait: messages there are taken. A cancelled wait counts once in
/// `NumberOfEmptyReceives`, as a wait that ends empty does, and records nothing under its
/// `attempt_id`. (A replay of an `attempt_id` that waits behind a stopped process, at most a
/// second, does not look at the flag.) `cancel` NULL: [`shmfifo_receive`].
///
/// # Safety
/// As [`shmfifo_receive`]; `cancel` NULL or an `int32_t` that stays valid during the call and
/// is written only atomically.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_receive_cancellable(
    q: *const shmfifo_queue,
    opts: *const shmfifo_receive_options,
    cancel: *const i32,
    buf: *mut shmfifo_receive_buffer,
    out: *mut shmfifo_message,
    out_cap: usize,
    count: *mut usize,
) -> shmfifo_result {
    // SAFETY: NULL, or valid and written only atomically during the call, per the contract.
    let cancel = (!cancel.is_null()).then(|| unsafe { CancelFlag::new(cancel) });
    // SAFETY: the caller's contract is this function's.
    unsafe { receive(q, opts, cancel, buf, out, out_cap, count) }
}

/// [`shmfifo_receive`], its wait ended by `cancel` where there is one.
///
/// # Safety
/// As [`shmfifo_receive`].
unsafe fn receive(
    q: *const shmfifo_queue,
    opts: *const shmfifo_receive_options,
    cancel: Option<CancelFlag>,
    buf: *mut shmfifo_receive_buffer,
    out: *mut shmfifo_message,
    out_cap: usize,
    count: *mut usize,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let count = unsafe { out_ptr(count, "count") }?;
        *count = 0;
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let b = unsafe { buf.as_mut() }.ok_or_else(|| null("buf"))?;
        // SAFETY: per the contract.
        let o = unsafe { opts.as_ref() }
            .copied()
            .unwrap_or_else(|| shmfifo_receive_options_default());
        // SAFETY: per the contract.
        let attempt_id = unsafe { o.attempt_id.get("attempt_id", MAX_ID_LEN) }?;
        // The request's own errors first, as SQS reports them (max_messages 11 is
        // InvalidParameterValue, whatever room `out` has).
        let mut ro = ReceiveOptions::max(o.max_messages);
        if o.visibility_timeout_ms >= 0 {
            ro = ro.visibility_timeout(Duration::from_millis(o.visibility_timeout_ms as u64));
        }
        if o.wait_time_ms >= 0 {
            ro = ro.wait(Duration::from_millis(o.wait_time_ms as u64));
        }
        ro.check()?;
        if out.is_null() {
            return Err(null("out"));
        }
        if out_cap < o.max_messages as usize {
            return Err(Fail(
                SHMFIFO_BUFFER_TOO_SMALL,
                format!(
                    "out has room for {out_cap} messages, max_messages is {}",
                    o.max_messages
                ),
            ));
        }
        // 0 or 1, as every flag of the C ABI: another value was read as "on".
        let borrow = crate::config::flag_or(
            o.borrow,
            SHMFIFO_INVALID_PARAMETER_VALUE,
            "receive option borrow",
        )?;
        // A borrowing receive goes into the buffer itself (`receive_borrowed_into`: nothing
        // allocated once the buffer has grown); each body's place in the mapping is kept in
        // the buffer's `views` (written by a borrowing receive only: a copying one touches
        // none of them).
        // The flag looked at by the waiting thread itself.
        let looked = cancel.as_ref().map(|c| move || c.is_set());
        let looked = looked.as_ref().map(|c| c as &dyn shmfifo_core::Cancel);
        let n = match (looked, attempt_id, borrow) {
            (Some(c), id, false) => q.receive_cancellable_into(&ro, id, c, &mut b.rb)?,
            (None, Some(id), false) => q.receive_with_attempt_id_into(&ro, id, &mut b.rb)?,
            (None, None, false) => q.receive_into(&ro, &mut b.rb)?,
            (c, id, true) => {
                let got = match (c, id) {
                    (Some(c), id) => q.receive_borrowed_cancellable_into(&ro, id, c, &mut b.rb)?,
                    (None, Some(id)) => {
                        q.receive_borrowed_with_attempt_id_into(&ro, id, &mut b.rb)?
                    }
                    (None, None) => q.receive_borrowed_into(&ro, &mut b.rb)?,
                };
                for (v, m) in b.views.iter_mut().zip(got.iter()) {
                    let body = m.body();
                    *v = (body.as_ptr(), body.len());
                }
                got.len().min(b.views.len())
            }
        };
        // Never more than the caller's room, whatever the receive returned (it returns at most
        // `max_messages`, which is at most `out_cap`).
        let n = n.min(out_cap);
        // SAFETY: `out_cap >= n` writable entries, per the contract.
        let out = unsafe { std::slice::from_raw_parts_mut(out, n) };
        if b.attrs.len() < n {
            // Each with room for one: a message without attributes then hands C a pointer to
            // allocated memory, never an empty Vec's dangling one (`memcpy(dst, p, 0)` needs a
            // valid `p` before C2y).
            b.attrs.resize_with(n, || Vec::with_capacity(1));
        }
        for (k, (o, av)) in out.iter_mut().zip(&mut b.attrs).enumerate() {
            // Each message and its body: a view of the buffer's copy, or (borrowing) of the
            // queue's memory.
            let (m, body) = if borrow {
                let (p, len) = b.views[k];
                (
                    &b.rb.messages()[k],
                    shmfifo_str {
                        data: p.cast(),
                        len,
                    },
                )
            } else {
                let m = &b.rb.messages()[k];
                (m, shmfifo_str::of_bytes(m.bytes()))
            };
            av.clear();
            av.extend(m.attributes.iter().map(|a| shmfifo_attribute {
                name: shmfifo_str::of(&a.name),
                data_type: shmfifo_str::of(&a.data_type),
                // An empty value a valid pointer too (`of_bytes`).
                value: shmfifo_str::of_bytes(&a.value).data.cast(),
                value_len: a.value.len(),
            }));
            *o = shmfifo_message {
                body,
                group_id: shmfifo_str::of(&m.group_id),
                dedup_id: m
                    .dedup_id
                    .as_deref()
                    .map_or(shmfifo_str::ABSENT, shmfifo_str::of),
                message_id: [0; 40],
                receipt_handle: [0; 48],
                sequence_number: [0; 40],
                sent_timestamp_ms: m.sent_timestamp,
                first_receive_timestamp_ms: m.first_receive_timestamp,
                receive_count: m.receive_count,
                attribute_count: av.len() as u32,
                attributes: av.as_ptr(),
                dead_letter_source: m
                    .dead_letter_source
                    .as_deref()
                    .map_or(shmfifo_str::ABSENT, shmfifo_str::of),
            };
            put(&mut o.message_id, m.message_id.text().as_str());
            put(&mut o.receipt_handle, m.receipt_handle.text().as_str());
            put_u128(&mut o.sequence_number, m.sequence_number);
        }
        *count = n;
        Ok(())
    })
}

/// A receipt handle argument: bytes that are not UTF-8 are no handle
/// (`SHMFIFO_RECEIPT_HANDLE_IS_INVALID`, as a batch entry's are), not `SHMFIFO_INVALID_UTF8`.
///
/// # Safety
/// `receipt` NULL or a NUL-terminated string.
unsafe fn receipt_text<'a>(receipt: *const c_char) -> R<&'a str> {
    // SAFETY: forwarded.
    unsafe { cstr(receipt, "receipt") }.map_err(|f| match f.0 {
        SHMFIFO_INVALID_UTF8 => Fail(
            SHMFIFO_RECEIPT_HANDLE_IS_INVALID,
            "the receipt handle is invalid: its bytes are not UTF-8, as no handle's are".into(),
        ),
        _ => f,
    })
}

/// Deletes a received message by its receipt handle (NUL-terminated text).
///
/// # Safety
/// `q` a live handle; `receipt` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_delete(
    q: *const shmfifo_queue,
    receipt: *const c_char,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let h = unsafe { receipt_text(receipt) }?;
        q.delete_str(h)?;
        Ok(())
    })
}

/// Changes a received message's visibility timeout (ms from now; 0: visible at once).
///
/// # Safety
/// `q` a live handle; `receipt` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_change_visibility(
    q: *const shmfifo_queue,
    receipt: *const c_char,
    timeout_ms: u64,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let h = unsafe { receipt_text(receipt) }?;
        q.change_visibility_str(h, Duration::from_millis(timeout_ms))?;
        Ok(())
    })
}

/// Deletes every message, visible or in flight, and clears the dedup table. `purged` (may be
/// NULL) receives how many messages were deleted.
///
/// # Safety
/// `q` a live handle; `purged` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_purge(
    q: *const shmfifo_queue,
    purged: *mut u64,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        let n = q.purge()?;
        // SAFETY: NULL or writable.
        if let Some(p) = unsafe { purged.as_mut() } {
            *p = n;
        }
        Ok(())
    })
}

/// Moves a test clock forward by `ms` milliseconds, for every process (see
/// `shmfifo_config.test_clock`): timers that end within it end now. A queue on the real clock
/// answers `SHMFIFO_INVALID_CONFIG`.
///
/// # Safety
/// `q` a live handle.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_advance_clock(
    q: *const shmfifo_queue,
    ms: u64,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        q.advance_clock(Duration::from_millis(ms)).map_err(|e| match e {
            // The core's text names its Rust builder; a C program sets a field.
            Error::InvalidConfig { setting: "test_clock", ref reason } if reason.contains("real clock") => Fail(
                SHMFIFO_INVALID_CONFIG,
                "invalid setting test_clock: this queue runs on the real clock; only a queue created with shmfifo_config.test_clock = 1 has a clock to advance".into(),
            ),
            e => e.into(),
        })?;
        Ok(())
    })
}

/// Maps every page of the queue into this process now, instead of a page fault at the first
/// touch of each (see `Queue::prefault`; a no-op before Linux 5.14).
///
/// # Safety
/// `q` a live handle.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_prefault(q: *const shmfifo_queue) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        q.prefault()?;
        // A file cut (by anyone who may write it): its pages are gone, not faulted in.
        q.check_file()?;
        Ok(())
    })
}

/// Repairs what dead processes left behind (also done on open and by idle receivers).
///
/// # Safety
/// `q` a live handle.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_recover(q: *const shmfifo_queue) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        unsafe { queue(q) }?.recover()?;
        Ok(())
    })
}

/// Reads a queue's settings and counters (a scan of the arena).
///
/// # Safety
/// `q` a live handle; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_get_attributes(
    q: *const shmfifo_queue,
    out: *mut shmfifo_queue_attributes,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let out = unsafe { out_ptr(out, "out") }?;
        let a = q.attributes();
        // A file cut (by anyone who may write it): its figures read as zeros, not the queue's.
        q.check_file()?;
        *out = shmfifo_queue_attributes {
            approximate_number_of_messages: a.approximate_number_of_messages,
            approximate_number_of_messages_not_visible: a
                .approximate_number_of_messages_not_visible,
            approximate_number_of_messages_delayed: a.approximate_number_of_messages_delayed,
            visibility_timeout_ms: a.visibility_timeout.as_millis() as u64,
            receive_wait_ms: a.receive_message_wait_time.as_millis() as u64,
            maximum_message_size: a.maximum_message_size,
            max_participants: a.max_participants,
            created_timestamp_ms: a.created_timestamp,
            active_groups: a.active_groups,
            max_groups: a.max_groups,
            arena_bytes: a.arena_bytes,
            deduplication: match a.deduplication {
                Deduplication::Off => 0,
                Deduplication::Queue => 1,
                _ => 2,
            },
            content_based_deduplication: u32::from(a.content_based_deduplication),
            deduplication_interval_ms: a.deduplication_interval.as_millis() as u64,
            dedup_entries: a.dedup_entries,
            dedup_entries_in_use: a.dedup_entries_in_use,
            delay_ms: a.delay.as_millis() as u64,
            message_retention_period_ms: a.message_retention_period.as_millis() as u64,
            max_in_flight: a.max_in_flight,
            in_flight_count: a.in_flight_count,
            in_flight_limit_hits: a.in_flight_limit_hits,
            moved_to_dead_letter: a.moved_to_dead_letter,
            retention_expiries: a.retention_expiries,
            max_receive_count: a.redrive_policy.as_ref().map_or(0, |p| p.max_receive_count),
            dead_letter_queue: [0; 257],
            release_on_death: u32::from(a.release_on_death),
            dedup_overflow: u32::from(a.dedup_overflow == DedupOverflow::Refuse),
            dedup_evictions: a.dedup_evictions,
            effective_deduplication_interval_ms: a.effective_deduplication_interval.as_millis()
                as u64,
            quarantined_messages: a.quarantined_messages,
            quarantined_groups: a.quarantined_groups,
            test_clock_ms: a.test_clock_ms.unwrap_or(0),
            body_mode: u32::from(a.body_mode == shmfifo_core::BodyMode::Binary),
            size_limit_bytes: a.size_limit_bytes,
            grows: a.grows,
            group_capacity: a.group_capacity,
        };
        if let Some(p) = &a.redrive_policy {
            put(&mut out.dead_letter_queue, &p.dead_letter_queue);
        }
        Ok(())
    })
}

/// Reads a queue's lifetime counters (cheap: one load per counter per participant slot;
/// safe while the queue is in use).
///
/// # Safety
/// `q` a live handle; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_get_counters(
    q: *const shmfifo_queue,
    out: *mut shmfifo_counters,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let out = unsafe { out_ptr(out, "out") }?;
        let c = q.counters();
        // As in `shmfifo_queue_get_attributes`.
        q.check_file()?;
        *out = shmfifo_counters {
            sent: c.sent,
            duplicates: c.duplicates,
            received: c.received,
            deleted: c.deleted,
            visibility_expiries: c.visibility_expiries,
            moved_to_dead_letter: c.moved_to_dead_letter,
            retention_expiries: c.retention_expiries,
            in_flight_limit_hits: c.in_flight_limit_hits,
            waits: c.waits,
            wake_ups: c.wake_ups,
            contention_retries: c.contention_retries,
            participants_recovered: c.participants_recovered,
            empty_receives: c.empty_receives,
        };
        Ok(())
    })
}

/// Changes one live setting, for every process at once, by its SQS attribute name and text
/// value: `VisibilityTimeout`, `DelaySeconds`, `MessageRetentionPeriod`,
/// `ReceiveMessageWaitTimeSeconds` (seconds), or `VisibilityTimeoutMs`, `DelayMs`,
/// `MessageRetentionPeriodMs` (ms); `MaximumMessageSize` (bytes, up to 1 MiB: a larger size
/// class is added when first needed, except on a queue created with `size_limit` 0, which
/// takes up to what its size classes hold); `ContentBasedDeduplication` (`true` or `false`);
/// `FifoQueue` (`true`, a no-op); `RedrivePolicy` as SQS's JSON
/// (`{"deadLetterTargetArn":"dlq-name-or-path","maxReceiveCount":5}`), or the empty string to
/// remove it. Nothing changes on error: a value that does not parse or is out of range is
/// `SHMFIFO_INVALID_CONFIG` (SQS's InvalidAttributeValue), except a `RedrivePolicy` whose
/// `maxReceiveCount` is outside 1–1,000, `SHMFIFO_INVALID_PARAMETER_VALUE` (SQS's code for
/// it); a setting fixed at creation (`DeduplicationScope`, `FifoThroughputLimit`,
/// `MaxInFlight`), or `ContentBasedDeduplication` `true` on a queue created without
/// deduplication, `SHMFIFO_ATTRIBUTE_NOT_MUTABLE`; another name
/// `SHMFIFO_INVALID_ATTRIBUTE_NAME`, and a dead-letter queue that is missing, is this queue,
/// does not deduplicate or takes smaller messages `SHMFIFO_DEAD_LETTER_QUEUE`. A delay change
/// is retroactive; a retention change applies to messages already queued.
///
/// # Safety
/// `q` a live handle; `name` and `value` valid views (both required: `data` non-NULL).
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_set_attribute(
    q: *const shmfifo_queue,
    name: shmfifo_str,
    value: shmfifo_str,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let name = unsafe { name.required("name", MAX_ATTRIBUTE_NAME) }?;
        // SAFETY: per the contract.
        let value = unsafe { value.required("value", MAX_PATH) }?;
        q.set_attribute(name, value)?;
        Ok(())
    })
}

/// How often a redrive polls a C cancellation flag.
pub(crate) const CANCEL_POLL: Duration = Duration::from_millis(1);

/// The address of a C cancellation flag, handed to the watcher thread. Made only by
/// [`CancelFlag::new`].
pub(crate) struct CancelFlag(*const AtomicI32);

// SAFETY: the flag is only loaded atomically, and the caller of `shmfifo_queue_redrive` keeps
// it valid during the call, which joins the watcher before it returns (`Watcher::drop`); the
// caller of `shmfifo_receive_cancellable` keeps it valid during its call, in whose thread
// alone it is loaded.
unsafe impl Send for CancelFlag {}

impl CancelFlag {
    /// # Safety
    /// `p` must point to an `int32_t` that stays valid, and is written only atomically, while
    /// the flag is used.
    unsafe fn new(p: *const i32) -> CancelFlag {
        // `AtomicI32` has the size and alignment of `i32`; the flag is only loaded.
        CancelFlag(p.cast::<AtomicI32>())
    }
    fn is_set(&self) -> bool {
        // SAFETY: valid during the call that made it (see the `Send` impl), and written only
        // atomically (the callers' contracts). Relaxed: a flag; nothing else is published
        // through it.
        unsafe { &*self.0 }.load(Ordering::Relaxed) != 0
    }
}

/// The watcher thread of a cancellable redrive: dropping it (also while unwinding) stops and
/// joins the thread, so that it never outlives the call and its flag.
pub(crate) struct Watcher {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Release: pairs with the watcher's Acquire load.
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// Runs `q.redrive(opts)` with a watcher thread that copies the C flag into the Rust
/// cancellation flag while the redrive runs. (A plain thread, not a scoped one: a scope would
/// give the calling thread a `Thread` handle that lives until it exits.)
pub(crate) fn redrive_watched(
    q: &Queue,
    mut opts: RedriveOptions,
    flag: CancelFlag,
) -> R<core_api::RedriveReport> {
    if flag.is_set() {
        return Ok(core_api::RedriveReport {
            cancelled: true,
            ..Default::default()
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    opts.cancel = Some(stop.clone());
    let done = Arc::new(AtomicBool::new(false));
    let thread = {
        let done = done.clone();
        std::thread::Builder::new()
            .name("shmfifo-redrive-cancel".into())
            .spawn(move || {
                // Acquire: pairs with `Watcher::drop`'s Release store.
                while !done.load(Ordering::Acquire) {
                    if flag.is_set() {
                        // Relaxed: the redrive loads it Relaxed; nothing is published.
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::park_timeout(CANCEL_POLL);
                }
            })
            .map_err(|e| {
                Fail(
                    SHMFIFO_IO,
                    format!("starting the cancellation watcher: {e}"),
                )
            })?
    };
    let _watcher = Watcher {
        done,
        thread: Some(thread),
    };
    Ok(q.redrive(&opts)?)
}

/// Moves messages from this (dead-letter) queue back to their source queues, or to
/// `opts->destination` (`opts` NULL: the defaults): oldest first, as new messages (new message
/// id, sequence number, receive count and retention), at most `max_per_second`, until no
/// message is visible here, `limit` messages moved, or `*cancel` set. Each message is sent
/// before it is deleted here. `out` (may be NULL) receives the report; on error it is zeroed,
/// and messages moved before the error stay moved. A `destination` that is not there is
/// `SHMFIFO_QUEUE_DOES_NOT_EXIST` before anything moves, whether or not a message is here
/// (a `*cancel` already set when the call begins ends it first: `SHMFIFO_OK`, cancelled,
/// nothing looked at).
///
/// # Safety
/// `q` a live handle; `opts` NULL or valid (its `destination` view, and its `cancel` NULL or
/// an `int32_t` that stays valid during the call); `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_queue_redrive(
    q: *const shmfifo_queue,
    opts: *const shmfifo_redrive_options,
    out: *mut shmfifo_redrive_report,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: NULL or writable, per the contract.
        if let Some(out) = unsafe { out.as_mut() } {
            *out = shmfifo_redrive_report {
                moved: 0,
                skipped: 0,
                cancelled: 0,
            };
        }
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let o = unsafe { opts.as_ref() }
            .copied()
            .unwrap_or_else(|| shmfifo_redrive_options_default());
        // SAFETY: per the contract.
        let dest = unsafe { o.destination.get("destination", MAX_PATH) }?.filter(|d| !d.is_empty());
        let ro = RedriveOptions {
            destination: dest.map(str::to_owned),
            max_per_second: (o.max_per_second > 0).then_some(o.max_per_second),
            limit: (o.limit > 0).then_some(o.limit),
            cancel: None,
            sources: None,
            progress: None,
        };
        let rep = if o.cancel.is_null() {
            q.redrive(&ro)?
        } else {
            // SAFETY: `cancel` points to an `int32_t` valid during the call, per the contract;
            // `redrive_watched` uses it only during the call.
            let flag = unsafe { CancelFlag::new(o.cancel) };
            redrive_watched(q, ro, flag)?
        };
        // SAFETY: NULL or writable, per the contract.
        if let Some(out) = unsafe { out.as_mut() } {
            *out = shmfifo_redrive_report {
                moved: rep.moved,
                skipped: rep.skipped,
                cancelled: u32::from(rep.cancelled),
            };
        }
        Ok(())
    })
}
