//! Zero-copy forms: loaned sends (`shmfifo_loan_*`), loaned batches (`shmfifo_loan_batch_*`)
//! and the check of a borrowed body (`shmfifo_verify`; a borrowing receive is
//! `shmfifo_receive` with `shmfifo_receive_options.borrow` set).

use core::ffi::c_char;

use shmfifo_core::{Loan, LoanBatch, LoanOptions, MessageAttribute, Queue};

use crate::{boundary::*, error::*, message::*, queue::*};

/// A slot of a queue lent to the caller to write a message's body in place
/// ([`shmfifo_loan_new`]). Send it with [`shmfifo_loan_send`] or give it back with
/// [`shmfifo_loan_release`]. A process that dies holding one loses nothing: the queue's
/// recovery frees the slot.
pub struct shmfifo_loan {
    // Declared first, so dropped first: it gives its slot back through `q`.
    loan: Option<Loan<'static>>,
    // The queue the loan borrows, boxed so that its address is stable (a clone of the
    // caller's handle: the loan keeps the mapping alive by itself).
    q: Box<Queue>,
}

/// Lends a slot of `q`'s smallest size class that holds `len` bytes, for a message to
/// `group_id`, and writes the new loan to `*out`: fill `shmfifo_loan_data(loan)` (its bytes
/// are what the slot held before, not zeros), then send it. Errors: `len` 0 or over the
/// maximum message size, a bad group id (`SHMFIFO_INVALID_PARAMETER_VALUE`); an absent group
/// (`data` NULL: `SHMFIFO_MISSING_PARAMETER`, as for `shmfifo_send`); no free slot in the
/// class (`SHMFIFO_SIZE_CLASS_FULL`). On a text queue a body that is not UTF-8 is refused when
/// the loan is sent (`SHMFIFO_INVALID_MESSAGE_CONTENTS`, as `shmfifo_send` refuses one).
///
/// # Safety
/// `q` a live handle; `group_id` a valid view; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_new(
    q: *const shmfifo_queue,
    group_id: shmfifo_str,
    len: usize,
    out: *mut *mut shmfifo_loan,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let out = unsafe { out_ptr(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let group = unsafe { group_id.get("group_id", MAX_ID_LEN) }?
            .ok_or_else(|| missing("MessageGroupId"))?;
        let mut l = Box::new(shmfifo_loan {
            loan: None,
            q: Box::new(q.clone()),
        });
        // SAFETY: the loan borrows `*l.q`, a heap allocation that neither moves nor is freed
        // while the loan lives: `shmfifo_loan` drops `loan` before `q`, and nothing else
        // touches `q`. The lifetime is widened to `'static` only to store the two together.
        let qref: &'static Queue = unsafe { &*(&*l.q as *const Queue) };
        l.loan = Some(qref.loan(group, len)?);
        *out = Box::into_raw(l);
        Ok(())
    })
}

/// The loan's bytes, to fill (NULL for a NULL loan or one already sent).
///
/// # Safety
/// `l` NULL or a live loan, not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_data(l: *mut shmfifo_loan) -> *mut u8 {
    // SAFETY: per the contract.
    match unsafe { l.as_mut() }.and_then(|l| l.loan.as_mut()) {
        Some(loan) => loan.as_mut_slice().as_mut_ptr(),
        None => core::ptr::null_mut(),
    }
}

/// The loan's length in bytes (0 for a NULL loan).
///
/// # Safety
/// `l` NULL or a live loan.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_len(l: *const shmfifo_loan) -> usize {
    // SAFETY: per the contract.
    unsafe { l.as_ref() }
        .and_then(|l| l.loan.as_ref())
        .map_or(0, Loan::len)
}

/// Shortens the loan's body to `len` bytes (a longer `len` changes nothing). A `len` of 0 is
/// `SHMFIFO_INVALID_PARAMETER_VALUE`, the loan unchanged: a body is never empty (release the
/// loan to send nothing; it kept one byte, and sent it).
///
/// # Safety
/// `l` NULL or a live loan, not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_truncate(l: *mut shmfifo_loan, len: usize) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let l = unsafe { l.as_mut() }.ok_or_else(|| null("loan"))?;
        let loan = l.loan.as_mut().ok_or_else(|| null("loan"))?;
        if len == 0 {
            return Err(shmfifo_core::Error::InvalidParameterValue {
                parameter: "len",
                reason: "a message body is at least 1 byte: release the loan to send nothing"
                    .into(),
            }
            .into());
        }
        loan.truncate(len);
        Ok(())
    })
}

/// Sends the loan's body in place with `dedup_id` (a NULL view: none) and `attribute_count`
/// attributes: checked as `shmfifo_send` checks a message (on a text queue the bytes must be
/// UTF-8 text, S7), then enqueued without a copy. On success the loan is consumed: it is
/// freed and `*loan` set to NULL, and `out` (if not NULL) gets the result (a duplicate, D1,
/// gives the slot back). On an error nothing was enqueued and the loan stays, its bytes as
/// written: send it again or release it.
///
/// # Safety
/// `loan` points to a live loan pointer; the views valid; `attributes` `attribute_count`
/// entries; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_send(
    loan: *mut *mut shmfifo_loan,
    dedup_id: shmfifo_str,
    attributes: *const shmfifo_attribute,
    attribute_count: usize,
    out: *mut shmfifo_send_result,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let slot = unsafe { loan.as_mut() }.ok_or_else(|| null("loan"))?;
        // SAFETY: per the contract: `*slot` is a live loan.
        let l = unsafe { slot.as_mut() }.ok_or_else(|| null("loan"))?;
        let max = l.q.maximum_message_size() as usize;
        // SAFETY: per the contract.
        let dedup = unsafe { dedup_id.get("dedup_id", MAX_ID_LEN) }?;
        let mut attrs = Vec::new();
        // SAFETY: per the contract.
        unsafe { crate::message::attributes(attributes, attribute_count, &mut attrs, max) }?;
        let mut opts = LoanOptions::new().attributes(&attrs);
        if let Some(d) = dedup {
            opts = opts.dedup_id(d);
        }
        let taken = l.loan.take().ok_or_else(|| null("loan"))?;
        match taken.send_with(&opts) {
            Ok(r) => {
                // SAFETY: NULL or writable, per the contract.
                if let Some(o) = unsafe { out.as_mut() } {
                    *o = send_result(&r);
                }
                // SAFETY: `*slot` came from `Box::into_raw` in `shmfifo_loan_new`; it is
                // handed back once, and the caller's pointer is cleared.
                drop(unsafe { Box::from_raw(*slot) });
                *slot = core::ptr::null_mut();
                Ok(())
            }
            Err(e) => {
                let e = *e;
                l.loan = Some(e.loan);
                Err(e.error.into())
            }
        }
    })
}

/// Gives the loan's slot back unsent and frees the loan (NULL is ignored).
///
/// # Safety
/// `l` NULL or a live loan, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_release(l: *mut shmfifo_loan) {
    if !l.is_null() {
        // SAFETY: it came from Box::into_raw and is handed back once.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(unsafe { Box::from_raw(l) })
        }));
    }
}

/// One member of a loaned batch ([`shmfifo_loan_batch_new`]): its body's length and its
/// options, which lie right after the body in the slot (so they are given at the loan).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_loan_member {
    /// The body's length in bytes (at least 1).
    pub len: usize,
    /// `MessageDeduplicationId` (a NULL view: none; with content-based deduplication the
    /// send generates it from the body).
    pub dedup_id: shmfifo_str,
    /// The attributes (`attribute_count` of them; NULL when 0).
    pub attributes: *const shmfifo_attribute,
    /// Number of attributes (at most 10).
    pub attribute_count: usize,
}

/// One slot of a queue lent for a batch of up to 10 messages to one group
/// ([`shmfifo_loan_batch_new`]): fill each member's body in place
/// ([`shmfifo_loan_batch_data`]), then send them as one unit ([`shmfifo_loan_batch_send`]),
/// or give the slot back ([`shmfifo_loan_batch_release`]). A process that dies holding one
/// loses nothing: the queue's recovery frees the slot.
pub struct shmfifo_loan_batch {
    // Declared first, so dropped first: it gives its slot back through `q`.
    batch: Option<LoanBatch<'static>>,
    // The queue the batch borrows, boxed so that its address is stable (a clone of the
    // caller's handle: the batch keeps the mapping alive by itself).
    q: Box<Queue>,
}

/// Lends one slot of `q` for `count` (1–10) messages to `group_id`, member `j` a body of
/// `members[j].len` bytes sent with `members[j]`'s dedup id and attributes, laid out as the
/// one pack a batch to one group makes, and writes the new loaned batch to `*out`: fill each
/// member's bytes (`shmfifo_loan_batch_data`: what the slot held before, not zeros), then
/// send. Errors (nothing lent): `count` 0 (`SHMFIFO_EMPTY_BATCH_REQUEST`) or over 10
/// (`SHMFIFO_TOO_MANY_ENTRIES_IN_BATCH_REQUEST`), over 1 MiB in all
/// (`SHMFIFO_BATCH_REQUEST_TOO_LONG`), a body of 0 bytes or over the maximum message size, a
/// bad or absent group id (absent: `SHMFIFO_INVALID_PARAMETER_VALUE`, SQS's code for a batch,
/// as in `shmfifo_send_batch`), dedup id or attribute, a dedup id missing where the queue needs one, or a
/// batch larger than the largest size class (`SHMFIFO_INVALID_PARAMETER_VALUE` or
/// `SHMFIFO_MISSING_PARAMETER`); no free slot in the class (`SHMFIFO_SIZE_CLASS_FULL`).
///
/// # Safety
/// `q` a live handle; `group_id` a valid view; `members` `count` entries (NULL when 0), their
/// views and attribute arrays valid; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_batch_new(
    q: *const shmfifo_queue,
    group_id: shmfifo_str,
    members: *const shmfifo_loan_member,
    count: usize,
    out: *mut *mut shmfifo_loan_batch,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let out = unsafe { out_ptr(out, "out") }?;
        *out = core::ptr::null_mut();
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        // S12: a batch's entry without a group is SQS's InvalidParameterValue (a single
        // message's, `shmfifo_loan_new`'s, is MissingParameter, S1).
        let group = unsafe { group_id.get("group_id", MAX_ID_LEN) }?.ok_or_else(|| {
            Fail::from(shmfifo_core::Error::InvalidParameterValue {
                parameter: "MessageGroupId",
                reason: "The request must contain the parameter MessageGroupId.".into(),
            })
        })?;
        // The count checked before `members` is read (a huge one never reaches memory).
        if count == 0 {
            return Err(shmfifo_core::Error::EmptyBatchRequest.into());
        }
        if count > 10 {
            return Err(
                shmfifo_core::Error::TooManyEntriesInBatchRequest { entries: count }.into(),
            );
        }
        if members.is_null() {
            return Err(null("members"));
        }
        // SAFETY: `count` (1–10) members there, per the contract.
        let list = unsafe { std::slice::from_raw_parts(members, count) };
        let max = q.maximum_message_size() as usize;
        let mut attrs: Vec<Vec<MessageAttribute<'_>>> = (0..count).map(|_| Vec::new()).collect();
        for (m, a) in list.iter().zip(attrs.iter_mut()) {
            // SAFETY: per the contract.
            unsafe { crate::message::attributes(m.attributes, m.attribute_count, a, max) }?;
        }
        let mut opts = Vec::with_capacity(count);
        for (m, a) in list.iter().zip(&attrs) {
            let mut o = LoanOptions::new().attributes(a);
            // SAFETY: per the contract.
            if let Some(d) = unsafe { m.dedup_id.get("dedup_id", MAX_ID_LEN) }? {
                o = o.dedup_id(d);
            }
            opts.push((m.len, o));
        }
        let mut b = Box::new(shmfifo_loan_batch {
            batch: None,
            q: Box::new(q.clone()),
        });
        // SAFETY: the batch borrows `*b.q`, a heap allocation that neither moves nor is freed
        // while the batch lives: `shmfifo_loan_batch` drops `batch` before `q`, and nothing
        // else touches `q`. The lifetime is widened to `'static` only to store the two
        // together (the options are copied into the slot by the loan: nothing else is kept).
        let qref: &'static Queue = unsafe { &*(&*b.q as *const Queue) };
        b.batch = Some(qref.loan_batch(group, &opts)?);
        *out = Box::into_raw(b);
        Ok(())
    })
}

/// Member `j`'s body, to fill in place (NULL for a NULL batch, as `shmfifo_loan_batch_send`
/// leaves `*batch`, or for `j` past its last member); `*len` (if not NULL) gets its length
/// (0 with NULL).
///
/// # Safety
/// `b` NULL or a live loaned batch, not used by another thread meanwhile; `len` NULL or
/// writable. The bytes stay valid until the batch is sent or released.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_batch_data(
    b: *mut shmfifo_loan_batch,
    j: usize,
    len: *mut usize,
) -> *mut u8 {
    // SAFETY: per the contract.
    let (ptr, n) = match unsafe { b.as_mut() }.and_then(|b| b.batch.as_mut()) {
        Some(batch) if j < batch.len() => {
            let body = batch.body_mut(j);
            (body.as_mut_ptr(), body.len())
        }
        _ => (core::ptr::null_mut(), 0),
    };
    // SAFETY: NULL or writable, per the contract.
    if let Some(l) = unsafe { len.as_mut() } {
        *l = n;
    }
    ptr
}

/// The number of members of a loaned batch (0 for a NULL batch, as `shmfifo_loan_batch_send`
/// leaves `*batch`).
///
/// # Safety
/// `b` NULL or a live loaned batch.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_batch_count(b: *const shmfifo_loan_batch) -> usize {
    // SAFETY: per the contract.
    unsafe { b.as_ref() }
        .and_then(|b| b.batch.as_ref())
        .map_or(0, LoanBatch::len)
}

/// Sends the batch's members in place as one unit, in order (each body checked where it lies:
/// on a text queue it must be UTF-8 text, S7, or that member fails alone; a member whose dedup
/// id was sent before, D1, or repeats an earlier member's, D9, is answered as a duplicate; the
/// rest are enqueued together, without a copy). Returns `SHMFIFO_OK` with member `j`'s outcome
/// in `results[j]` (`results` holds `shmfifo_loan_batch_count(*batch)` entries), or an error
/// of the whole (a damaged queue). Either way the batch is consumed: freed and `*batch` set to
/// NULL, its slot linked or given back. A NULL `batch`, `*batch` or `results` is
/// `SHMFIFO_NULL_ARGUMENT` and consumes nothing (release the batch).
///
/// # Safety
/// `batch` points to a live loaned batch pointer; `results` writable for its member count.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_batch_send(
    batch: *mut *mut shmfifo_loan_batch,
    results: *mut shmfifo_batch_result,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let slot = unsafe { batch.as_mut() }.ok_or_else(|| null("batch"))?;
        if slot.is_null() {
            return Err(null("batch"));
        }
        if results.is_null() {
            return Err(null("results"));
        }
        // SAFETY: `*slot` came from `Box::into_raw` in `shmfifo_loan_batch_new`; it is handed
        // back once, and the caller's pointer is cleared (the batch is consumed whatever the
        // outcome).
        let mut b = unsafe { Box::from_raw(*slot) };
        *slot = core::ptr::null_mut();
        let taken = b.batch.take().ok_or_else(|| null("batch"))?;
        let n = taken.len();
        let rs = taken.send()?;
        // SAFETY: `n` writable results, per the contract.
        let out = unsafe { std::slice::from_raw_parts_mut(results, n) };
        for (o, r) in out.iter_mut().zip(&rs) {
            *o = batch_result(r);
        }
        Ok(())
    })
}

/// Gives a loaned batch's slot back unsent and frees it (NULL is ignored).
///
/// # Safety
/// `b` NULL or a live loaned batch, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_batch_release(b: *mut shmfifo_loan_batch) {
    if !b.is_null() {
        // SAFETY: it came from Box::into_raw and is handed back once.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            drop(unsafe { Box::from_raw(b) })
        }));
    }
}

/// Whether the message a receipt handle (NUL-terminated text) names is still in its slot as
/// that receive left it: call it after reading a borrowed body (`shmfifo_receive` with
/// `borrow` set). `SHMFIFO_OK`: the bytes read were that message's; `SHMFIFO_RECEIPT_HANDLE_EXPIRED`:
/// it was deleted, purged, dropped by the retention period, moved or received again meanwhile,
/// and what was read may belong to another message. (A message whose visibility timeout
/// passed, not yet received again, is still in its slot: `SHMFIFO_OK`, though a delete or
/// visibility change with that handle is refused with `SHMFIFO_RECEIPT_HANDLE_EXPIRED`.) A process that writes the queue's file outside the library can
/// change the bytes undetected (never make a reader read outside the mapping).
///
/// # Safety
/// `q` a live handle; `receipt` a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_verify(
    q: *const shmfifo_queue,
    receipt: *const c_char,
) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let q = unsafe { queue(q) }?;
        // SAFETY: per the contract.
        let h = unsafe { cstr(receipt, "receipt") }?;
        q.verify(&h.parse()?)?;
        Ok(())
    })
}
