//! The batch functions: send, delete and change-visibility batches, and the checks SQS makes
//! of a batch request (entry count, ids, total size) and of each entry, made before any entry
//! is read past its lengths.

use std::time::Duration;

use shmfifo_core::{BatchEntry, Error, MessageAttribute, SendMessage};

use crate::queue::{queue, shmfifo_queue};
use crate::{boundary::*, error::*, message::*};

/// The request-level checks of a batch of `n` entries, made before any entry is read: not
/// empty, at most SQS's 10 (a huge `n` never reaches memory), entries and outputs not NULL.
fn batch_request(n: usize, no_entries: bool, no_out: bool, out: &str) -> R {
    if n == 0 {
        return Err(Error::EmptyBatchRequest.into());
    }
    if n > MAX_BATCH {
        return Err(Error::TooManyEntriesInBatchRequest { entries: n }.into());
    }
    if no_entries {
        return Err(null("entries"));
    }
    if no_out {
        return Err(null(out));
    }
    Ok(())
}

/// Most entries in a batch (S11, H8).
const MAX_BATCH: usize = 10;
/// Longest batch entry id (S11).
const MAX_ENTRY_ID: usize = 80;
/// Most bytes a batch carries in all (S13).
const MAX_BATCH_BYTES: usize = 1_048_576;

/// A batch entry id. One too long (not read), or not UTF-8, is `SHMFIFO_INVALID_BATCH_ENTRY_ID`,
/// SQS's answer for an id that is not 1–80 of `[A-Za-z0-9_-]`, which the core gives for the
/// ids it reads.
///
/// # Safety
/// As [`shmfifo_str::get`].
unsafe fn entry_id<'a>(id: shmfifo_str) -> R<&'a str> {
    let invalid = |why: String| {
        Fail(
            SHMFIFO_INVALID_BATCH_ENTRY_ID,
            format!("batch entry id {why}: a batch entry id can only contain alphanumeric characters, hyphens and underscores, and can be at most {MAX_ENTRY_ID} letters long"),
        )
    };
    if !id.data.is_null() && id.len > MAX_ENTRY_ID {
        return Err(invalid(format!("is {} bytes long", id.len)));
    }
    // SAFETY: forwarded from the caller; the length is within the limit.
    match unsafe { id.get_bytes("entry id", MAX_ENTRY_ID) }? {
        None => Err(null("entry id")),
        Some(b) => std::str::from_utf8(b).map_err(|_| invalid("is not UTF-8".into())),
    }
}

/// The bytes a send batch entry counts against the batch's 1 MiB (its body and attributes, as
/// the core counts them), from the lengths alone: nothing past the entry's own fields and its
/// attribute array (when it has at most 10) is read.
///
/// # Safety
/// As [`shmfifo_send_message`]'s attributes.
unsafe fn entry_bytes(m: &shmfifo_send_message) -> usize {
    let mut n = m.body.len;
    if m.attribute_count <= shmfifo_core::MAX_ATTRIBUTES && !m.attributes.is_null() {
        // SAFETY: `attribute_count` (at most 10) attributes there, per the contract.
        let list = unsafe { std::slice::from_raw_parts(m.attributes, m.attribute_count) };
        for a in list {
            n = n
                .saturating_add(a.name.len)
                .saturating_add(a.data_type.len)
                .saturating_add(a.value_len);
        }
    }
    n
}

/// Whether a send batch entry fails on its own before its memory is read: a body or an
/// attribute value longer than the queue's maximum message size, or more than 10 attributes
/// (`SHMFIFO_INVALID_PARAMETER_VALUE`, the core's answer to the same entry).
///
/// # Safety
/// As [`entry_bytes`].
unsafe fn oversized(m: &shmfifo_send_message, max_body: usize) -> bool {
    if (!m.body.data.is_null() && m.body.len > max_body)
        || m.attribute_count > shmfifo_core::MAX_ATTRIBUTES
    {
        return true;
    }
    if m.attribute_count == 0 || m.attributes.is_null() {
        return false;
    }
    // SAFETY: `attribute_count` (at most 10) attributes there, per the contract.
    let list = unsafe { std::slice::from_raw_parts(m.attributes, m.attribute_count) };
    list.iter().any(|a| a.value_len > max_body)
}

/// Sends 1–10 messages in order. A request-level error (empty, too many, bad or repeated ids
/// (an id longer than 80 bytes is `SHMFIFO_INVALID_BATCH_ENTRY_ID`, as SQS answers), more than
/// 1 MiB in all, missing group or dedup id: a missing group is `SHMFIFO_INVALID_PARAMETER_VALUE`
/// here, SQS's code for a batch, where a single send's is `SHMFIFO_MISSING_PARAMETER`) is
/// returned and nothing is sent; otherwise returns
/// `SHMFIFO_OK` and each entry's outcome in `results[i]` (`results` holds `n` entries). As in
/// SQS, an entry whose body or an attribute value is longer than the queue's maximum message
/// size, or with more than 10 attributes, fails alone (`SHMFIFO_INVALID_PARAMETER_VALUE` in its
/// result, its memory past those lengths unread) and the others are sent; so does an entry
/// whose view cannot be read as its field (a body that is not UTF-8 on a text queue:
/// `SHMFIFO_INVALID_MESSAGE_CONTENTS`, as for a single send; a group or dedup id over 128
/// bytes, an attribute name or type over 256: `SHMFIFO_INVALID_PARAMETER_VALUE`; an absent
/// body: `SHMFIFO_MISSING_PARAMETER`; a NULL attribute value with a length:
/// `SHMFIFO_NULL_ARGUMENT`), with that code. (A NULL group or dedup id is absent: the
/// request's error where the queue needs one.)
///
/// # Safety
/// `entries` and `results` must hold `n` entries each (NULL allowed when `n` is 0).
#[no_mangle]
pub unsafe extern "C" fn shmfifo_send_batch(
    q: *const shmfifo_queue,
    entries: *const shmfifo_batch_entry,
    n: usize,
    results: *mut shmfifo_batch_result,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        batch_request(n, entries.is_null(), results.is_null(), "results")?;
        let max_body = q.maximum_message_size() as usize;
        let binary = q.body_mode() == shmfifo_core::BodyMode::Binary;
        // SAFETY: `n` entries at `entries`, per the contract.
        let list = unsafe { std::slice::from_raw_parts(entries, n) };
        // The request's checks first, from what every entry says of itself: its id, then the
        // batch's size from the lengths (an oversized entry counts, as in SQS).
        let ids = list
            .iter()
            // SAFETY: per the contract.
            .map(|e| unsafe { entry_id(e.id) })
            .collect::<R<Vec<&str>>>()?;
        let total = list.iter().fold(0usize, |t, e| {
            // SAFETY: per the contract.
            t.saturating_add(unsafe { entry_bytes(&e.message) })
        });
        if total > MAX_BATCH_BYTES {
            return Err(Error::BatchRequestTooLong { bytes: total }.into());
        }
        let mut attrs: Vec<Vec<MessageAttribute<'_>>> = (0..n).map(|_| Vec::new()).collect();
        // The code each entry that fails alone fails with.
        let mut alone: [Option<shmfifo_result>; MAX_BATCH] = [None; MAX_BATCH];
        let mut batch = Vec::with_capacity(n);
        for (k, ((e, a), id)) in list.iter().zip(attrs.iter_mut()).zip(ids).enumerate() {
            // SAFETY: per the contract.
            let read = if unsafe { oversized(&e.message, max_body) } {
                Err(SHMFIFO_INVALID_PARAMETER_VALUE) // unread
            } else {
                // SAFETY: per the contract.
                unsafe { message(&e.message, a, max_body, binary) }.map_err(|f| f.0)
            };
            let entry = match read {
                Ok(m) => m,
                Err(code) => {
                    // It fails alone. The core still sees it, empty (which it refuses for that
                    // entry only), so that the request's checks (distinct ids, a group and a
                    // dedup id on every entry) cover every entry: an id given but unreadable
                    // (too long, not UTF-8) stands as one given.
                    alone[k] = Some(code);
                    SendMessage {
                        // SAFETY: per the contract (the length checked first).
                        group_id: unsafe { given(e.message.group_id, "group_id") },
                        // SAFETY: as above.
                        dedup_id: unsafe { given(e.message.dedup_id, "dedup_id") },
                        body: "",
                        bytes: binary.then_some(&[][..]),
                        attributes: &[],
                        delay_seconds: None,
                    }
                }
            };
            batch.push(BatchEntry { id, entry });
        }
        let rs = q.send_batch(&batch)?;
        // SAFETY: `n` writable results, per the contract.
        let out = unsafe { std::slice::from_raw_parts_mut(results, n) };
        for (k, (o, r)) in out.iter_mut().zip(rs).enumerate() {
            *o = match alone[k] {
                Some(code) => shmfifo_batch_result {
                    code,
                    result: NO_SEND_RESULT,
                },
                None => batch_result(&r.result),
            };
        }
        Ok(())
    })
}

/// An id of an entry that fails alone, as the request's checks see it: absent if NULL (the
/// request's own error), else present (its text, or a stand-in where it is too long or not
/// UTF-8: that entry's error is already its own).
///
/// # Safety
/// As [`shmfifo_str::get`].
unsafe fn given<'a>(v: shmfifo_str, what: &str) -> Option<&'a str> {
    // SAFETY: forwarded from the caller.
    unsafe { v.get(what, MAX_ID_LEN) }.unwrap_or(Some("-"))
}

/// Shared body of the two handle batches.
///
/// # Safety
/// As [`shmfifo_delete_batch`].
pub(crate) unsafe fn handle_batch(
    q: *const shmfifo_queue,
    entries: *const shmfifo_handle_entry,
    n: usize,
    codes: *mut shmfifo_result,
    visibility: bool,
) -> R {
    // SAFETY: per the contract.
    let q = unsafe { queue(q) }?;
    batch_request(n, entries.is_null(), codes.is_null(), "codes")?;
    // SAFETY: `n` entries, per the contract.
    let list = unsafe { std::slice::from_raw_parts(entries, n) };
    let mut ids = Vec::with_capacity(n);
    let mut handles: Vec<(std::borrow::Cow<'_, str>, u64)> = Vec::with_capacity(n);
    for e in list {
        // SAFETY: per the contract.
        ids.push(unsafe { entry_id(e.id) }?);
        // SAFETY: per the contract.
        let receipt =
            unsafe { e.receipt.get_bytes("receipt", MAX_CSTR) }?.ok_or_else(|| null("receipt"))?;
        // A receipt that is not UTF-8 is that entry's failure (no handle is such bytes:
        // `SHMFIFO_RECEIPT_HANDLE_IS_INVALID`, its bytes quoted lossily), as any other bad
        // receipt is; it failed the whole batch.
        handles.push((String::from_utf8_lossy(receipt), e.timeout_ms));
    }
    let rs = if visibility {
        let b: Vec<_> = ids
            .iter()
            .zip(&handles)
            .map(|(id, (h, t))| BatchEntry {
                id,
                entry: (h.as_ref(), Duration::from_millis(*t)),
            })
            .collect();
        q.change_visibility_batch(&b)?
    } else {
        let b: Vec<_> = ids
            .iter()
            .zip(&handles)
            .map(|(id, (h, _))| BatchEntry {
                id,
                entry: h.as_ref(),
            })
            .collect();
        q.delete_batch(&b)?
    };
    // SAFETY: `n` writable codes, per the contract.
    let out = unsafe { std::slice::from_raw_parts_mut(codes, n) };
    for (o, r) in out.iter_mut().zip(rs) {
        *o = r.result.map_or_else(|e| code_of(&e), |()| SHMFIFO_OK);
    }
    Ok(())
}

/// Deletes 1–10 messages. Request-level errors are returned (nothing deleted); otherwise
/// `SHMFIFO_OK` with each entry's code in `codes[i]`.
///
/// # Safety
/// `entries` and `codes` must hold `n` entries each.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_delete_batch(
    q: *const shmfifo_queue,
    entries: *const shmfifo_handle_entry,
    n: usize,
    codes: *mut shmfifo_result,
) -> shmfifo_result {
    // SAFETY: forwarded.
    guard(|| unsafe { handle_batch(q, entries, n, codes, false) })
}

/// Changes the visibility of 1–10 messages (`timeout_ms` of each entry), as
/// [`shmfifo_delete_batch`].
///
/// # Safety
/// `entries` and `codes` must hold `n` entries each.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_change_visibility_batch(
    q: *const shmfifo_queue,
    entries: *const shmfifo_handle_entry,
    n: usize,
    codes: *mut shmfifo_result,
) -> shmfifo_result {
    // SAFETY: forwarded.
    guard(|| unsafe { handle_batch(q, entries, n, codes, true) })
}
