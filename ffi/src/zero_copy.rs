//! Zero-copy forms: loaned sends (`shmfifo_loan_*`) and the check of a borrowed
//! body (`shmfifo_verify`; a borrowing receive is `shmfifo_receive` with
//! `shmfifo_receive_options.borrow` set).

use core::ffi::c_char;

use shmfifo_core::{Loan, LoanOptions, Queue};

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
/// maximum message size, a bad group id (`SHMFIFO_INVALID_PARAMETER_VALUE`); no free slot in
/// the class (`SHMFIFO_SIZE_CLASS_FULL`).
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
        let group = unsafe { group_id.required("group_id", MAX_ID_LEN) }?;
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

/// Shortens the loan's body to `len` bytes (at least 1; a longer `len` changes nothing).
///
/// # Safety
/// `l` NULL or a live loan, not used by another thread meanwhile.
#[no_mangle]
pub unsafe extern "C" fn shmfifo_loan_truncate(l: *mut shmfifo_loan, len: usize) -> shmfifo_result {
    guard(|| {
        // SAFETY: per the contract.
        let l = unsafe { l.as_mut() }.ok_or_else(|| null("loan"))?;
        l.loan.as_mut().ok_or_else(|| null("loan"))?.truncate(len);
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

/// Whether the message a receipt handle (NUL-terminated text) names is still in its slot as
/// that receive left it: call it after reading a borrowed body (`shmfifo_receive` with
/// `borrow` set). `SHMFIFO_OK`: the bytes read were that message's; `SHMFIFO_RECEIPT_HANDLE_EXPIRED`:
/// it was deleted, purged, expired, moved or received again meanwhile, and what was read may
/// belong to another message. A process that writes the queue's file outside the library can
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
