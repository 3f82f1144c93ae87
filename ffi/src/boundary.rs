//! The boundary: panics caught, errors recorded, and every pointer, string and length from
//! the caller checked before it is used.

use core::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use shmfifo_core::Error;

use crate::error::*;

/// An error of the C layer: a code and its message.
pub(crate) struct Fail(pub(crate) shmfifo_result, pub(crate) String);

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail(code_of(&e), e.to_string())
    }
}

pub(crate) type R<T = ()> = Result<T, Fail>;

pub(crate) fn null(what: &str) -> Fail {
    Fail(SHMFIFO_NULL_ARGUMENT, format!("{what} is NULL"))
}

/// Runs `f`, turning errors and panics into a result code and the thread's last error.
pub(crate) fn guard(f: impl FnOnce() -> R) -> shmfifo_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            set_error(String::new());
            SHMFIFO_OK
        }
        Ok(Err(Fail(code, msg))) => {
            set_error(msg);
            code
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            set_error(format!("panic inside shmfifo: {what}"));
            SHMFIFO_PANIC
        }
    }
}

/// A string argument or view: `len` bytes at `data` (UTF-8, not NUL-terminated). `data` NULL
/// means "absent" (for optional parameters); a non-NULL `data` with `len` 0 is the empty
/// string.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmfifo_str {
    /// The bytes (NULL: absent).
    pub data: *const c_char,
    /// Number of bytes.
    pub len: usize,
}

impl shmfifo_str {
    pub(crate) const ABSENT: shmfifo_str = shmfifo_str {
        data: core::ptr::null(),
        len: 0,
    };
    pub(crate) fn of(s: &str) -> shmfifo_str {
        Self::of_bytes(s.as_bytes())
    }
    /// A view of bytes (a binary queue's body).
    pub(crate) fn of_bytes(b: &[u8]) -> shmfifo_str {
        shmfifo_str {
            data: b.as_ptr().cast(),
            len: b.len(),
        }
    }
    /// The bytes, if not NULL, whatever they hold (a body on a binary queue); the length is
    /// checked against `max` first, as in [`shmfifo_str::get`].
    ///
    /// # Safety
    /// As [`shmfifo_str::get`].
    pub(crate) unsafe fn get_bytes<'a>(self, what: &str, max: usize) -> R<Option<&'a [u8]>> {
        if self.data.is_null() {
            return Ok(None);
        }
        if self.len > max {
            return Err(Fail(
                SHMFIFO_INVALID_PARAMETER_VALUE,
                format!("{what} is {} bytes long; at most {max}", self.len),
            ));
        }
        // SAFETY: the caller guarantees `len` readable bytes at `data` (and `len <= max`).
        Ok(Some(unsafe {
            std::slice::from_raw_parts(self.data.cast::<u8>(), self.len)
        }))
    }
    /// The string, if not NULL. Its length is checked against `max` (its SQS limit) before a
    /// byte is read: a length past the limit is `SHMFIFO_INVALID_PARAMETER_VALUE`, never a
    /// read past the caller's memory.
    ///
    /// # Safety
    /// `data` must be NULL or point to `len` readable bytes that outlive `'a`.
    pub(crate) unsafe fn get<'a>(self, what: &str, max: usize) -> R<Option<&'a str>> {
        // SAFETY: forwarded from the caller.
        match unsafe { self.get_bytes(what, max) }? {
            None => Ok(None),
            Some(b) => std::str::from_utf8(b)
                .map(Some)
                .map_err(|_| Fail(SHMFIFO_INVALID_UTF8, format!("{what} is not UTF-8"))),
        }
    }
    /// # Safety
    /// As [`shmfifo_str::get`].
    pub(crate) unsafe fn required<'a>(self, what: &str, max: usize) -> R<&'a str> {
        // SAFETY: forwarded from the caller.
        unsafe { self.get(what, max) }?.ok_or_else(|| null(what))
    }
}

/// Longest NUL-terminated string argument (a queue name or path, a receipt handle) read: a
/// string with no NUL within it is refused, so an unterminated one is read at most this far.
pub(crate) const MAX_CSTR: usize = 4096;
/// Longest dead-letter queue path, redrive destination or setting value accepted.
pub(crate) const MAX_PATH: usize = 4096;

/// Reads a NUL-terminated string argument.
///
/// # Safety
/// `p` must be NULL or a valid NUL-terminated string.
pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> R<&'a str> {
    if p.is_null() {
        return Err(null(what));
    }
    // Bounded: look for the NUL within `MAX_CSTR` bytes, one byte at a time, so an
    // unterminated string is never read past that.
    let mut len = 0;
    // SAFETY: the caller guarantees a NUL-terminated string: every byte up to its NUL is
    // readable, and we stop at the NUL.
    while unsafe { *p.add(len) } != 0 {
        len += 1;
        if len > MAX_CSTR {
            return Err(Fail(
                SHMFIFO_INVALID_PARAMETER_VALUE,
                format!("{what} is longer than {MAX_CSTR} bytes (or not NUL-terminated)"),
            ));
        }
    }
    // SAFETY: `len` bytes before the NUL were just read.
    let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    std::str::from_utf8(b).map_err(|_| Fail(SHMFIFO_INVALID_UTF8, format!("{what} is not UTF-8")))
}

/// Writes `v`'s text into `dst` as [`put`] writes a `&str` (truncated to leave room for the
/// NUL), through the formatting machinery into the buffer itself: no `String` (a receive
/// writes a message id and a sequence number for every message, a send one of each).
pub(crate) fn put_display(dst: &mut [c_char], v: &dyn std::fmt::Display) {
    struct Into<'a> {
        dst: &'a mut [c_char],
        n: usize,
    }
    impl std::fmt::Write for Into<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = self.dst.len().saturating_sub(1) - self.n;
            let k = s.len().min(room);
            for (d, &b) in self.dst[self.n..self.n + k].iter_mut().zip(s.as_bytes()) {
                *d = b as c_char;
            }
            self.n += k;
            Ok(())
        }
    }
    if dst.is_empty() {
        return;
    }
    let mut w = Into { dst, n: 0 };
    // Never fails: the writer takes what fits.
    let _ = std::fmt::write(&mut w, format_args!("{v}"));
    let n = w.n;
    w.dst[n] = 0;
}

pub(crate) fn put(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, &b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = b as c_char;
    }
    dst[n] = 0;
}

/// Reads a required out-parameter.
///
/// # Safety
/// `p` must be NULL or valid for writing and unaliased for `'a`.
pub(crate) unsafe fn out_ptr<'a, T>(p: *mut T, what: &str) -> R<&'a mut T> {
    // SAFETY: guaranteed by the caller.
    unsafe { p.as_mut() }.ok_or_else(|| null(what))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: &[c_char]) -> String {
        let n = b.iter().position(|&c| c == 0).expect("NUL-terminated");
        b[..n].iter().map(|&c| c as u8 as char).collect()
    }

    /// `put_display` writes what `put` of the text writes: whole where it fits, cut to leave
    /// the NUL where not, and a value formatted in several pieces lands whole.
    #[test]
    fn put_display_writes_as_put_does() {
        let v = 12_345_678_901_234_567_890_123_456_789_u128;
        for len in 1..48 {
            let (mut a, mut b) = (vec![1 as c_char; len], vec![1 as c_char; len]);
            put_display(&mut a, &v);
            put(&mut b, &v.to_string());
            assert_eq!(a, b, "{len}");
            assert_eq!(text(&a), v.to_string()[..v.to_string().len().min(len - 1)]);
        }
        let mut c = [1 as c_char; 8];
        put_display(&mut c, &format_args!("{}-{}-{}", 12, 345, 6789));
        assert_eq!(text(&c), "12-345-");
        put_display(&mut [], &v); // nothing to write into, nothing written
    }
}
