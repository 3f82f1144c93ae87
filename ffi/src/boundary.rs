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

/// SQS's `MissingParameter` for a required view that is absent (`data` NULL).
pub(crate) fn missing(parameter: &'static str) -> Fail {
    Error::MissingParameter { parameter }.into()
}

/// A text queue's body: UTF-8 (ASCII checked a word at a time), or SQS's
/// `InvalidMessageContents` with where it stops being so.
pub(crate) fn body_text(b: &[u8]) -> R<&str> {
    text_or(b, |e| {
        Error::InvalidMessageContents {
            reason: format!(
                "the body is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        }
        .into()
    })
}

/// Runs `f`, turning errors and panics into a result code and the thread's last error.
pub(crate) fn guard(f: impl FnOnce() -> R) -> shmfifo_result {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            clear_error();
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
    /// A view of bytes (a binary queue's body). An empty one points at a static byte: an empty
    /// Rust slice's pointer is dangling (`0x1`), which C's `memcpy(dst, data, 0)` may not be
    /// given (C before C2y asks for a valid pointer whatever the length).
    pub(crate) fn of_bytes(b: &[u8]) -> shmfifo_str {
        static EMPTY: u8 = 0;
        shmfifo_str {
            data: if b.is_empty() {
                (&raw const EMPTY).cast()
            } else {
                b.as_ptr().cast()
            },
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
            Some(b) => utf8(b, what).map(Some),
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

extern "C" {
    /// POSIX's `strnlen` (glibc, musl): the bytes before the first NUL among the first
    /// `maxlen`, or `maxlen`.
    fn strnlen(s: *const c_char, maxlen: usize) -> usize;
}

/// Reads a NUL-terminated string argument.
///
/// # Safety
/// `p` must be NULL or a valid NUL-terminated string.
pub(crate) unsafe fn cstr<'a>(p: *const c_char, what: &str) -> R<&'a str> {
    if p.is_null() {
        return Err(null(what));
    }
    // Bounded: look for the NUL within `MAX_CSTR` bytes and the one after them, so an
    // unterminated string is never read past that. The C library's `strnlen` looks a vector
    // at a time (a receipt handle's 42 bytes: some 100 instructions less than a byte a step).
    // SAFETY: the caller guarantees a NUL-terminated string: every byte up to its NUL is
    // readable, and `strnlen` examines none past the NUL or past `MAX_CSTR + 1` bytes (POSIX;
    // glibc's and musl's wider reads stay inside the aligned blocks that hold those bytes,
    // which never cross into another page).
    let len = unsafe { strnlen(p, MAX_CSTR + 1) };
    if len > MAX_CSTR {
        return Err(Fail(
            SHMFIFO_INVALID_PARAMETER_VALUE,
            format!("{what} is longer than {MAX_CSTR} bytes (or not NUL-terminated)"),
        ));
    }
    // SAFETY: `len` bytes before the NUL were just read.
    let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    utf8(b, what)
}

/// `b` as text: ASCII (ids, handles, most bodies) checked a word at a time and taken as it is,
/// anything else decoded.
fn utf8<'a>(b: &'a [u8], what: &str) -> R<&'a str> {
    text_or(b, |_| {
        Fail(SHMFIFO_INVALID_UTF8, format!("{what} is not UTF-8"))
    })
}

/// `b` as text, or `fail` of why not: ASCII checked a word at a time and taken as it is,
/// anything else decoded.
fn text_or(b: &[u8], fail: impl FnOnce(std::str::Utf8Error) -> Fail) -> R<&str> {
    if b.is_ascii() {
        // SAFETY: every byte is below 0x80 (just checked): ASCII, which is UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).map_err(fail)
}

/// Writes a sequence number in decimal into `dst` as [`put`] does, without `Display`'s
/// `u128` division loop.
pub(crate) fn put_u128(dst: &mut [c_char], v: u128) {
    put(dst, itoa::Buffer::new().format(v));
}

/// Bytes as C chars (one byte each, whatever `c_char`'s sign).
fn as_c_chars(b: &[u8]) -> &[c_char] {
    // SAFETY: `c_char` is `i8` or `u8`, one byte with no invalid value, so `b.len()` bytes of
    // `u8` are as many valid `c_char`s, in the same memory, for as long as `b`.
    unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<c_char>(), b.len()) }
}

pub(crate) fn put(dst: &mut [c_char], s: &str) {
    let Some(room) = dst.len().checked_sub(1) else {
        return; // no room even for the NUL
    };
    let n = s.len().min(room);
    dst[..n].copy_from_slice(as_c_chars(&s.as_bytes()[..n]));
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

    /// An empty view (body, attribute value, id) points at a readable byte, never at the
    /// dangling `0x1` of an empty Rust slice, which C's `memcpy(dst, data, 0)` may not be given
    /// (a review's finding); a view of bytes points at them.
    #[test]
    fn an_empty_view_points_at_a_readable_byte() {
        let empty: Vec<u8> = Vec::new();
        let none = String::with_capacity(0);
        for v in [
            shmfifo_str::of(""),
            shmfifo_str::of(none.as_str()),
            shmfifo_str::of_bytes(&[]),
            shmfifo_str::of_bytes(&empty),
        ] {
            assert_eq!(v.len, 0);
            assert!(!v.data.is_null());
            assert_ne!(
                v.data.cast::<u8>(),
                core::ptr::NonNull::<u8>::dangling().as_ptr().cast_const(),
                "a dangling pointer"
            );
            // SAFETY: not dangling (asserted above): the static byte `of_bytes` points at.
            assert_eq!(unsafe { *v.data.cast::<u8>() }, 0);
        }
        let b = b"xy";
        let v = shmfifo_str::of_bytes(b);
        assert_eq!((v.data.cast::<u8>(), v.len), (b.as_ptr(), 2));
    }

    /// `put` and `put_u128` cut what does not fit to leave the NUL, and write nothing where
    /// there is no room for it.
    #[test]
    fn put_cuts_to_leave_the_nul() {
        let v = 12_345_678_901_234_567_890_123_456_789_u128;
        for len in 1..48 {
            let mut a = vec![1 as c_char; len];
            put(&mut a, &v.to_string());
            assert_eq!(text(&a), v.to_string()[..v.to_string().len().min(len - 1)]);
        }
        put(&mut [], "x");
        for v in [
            0,
            1,
            9,
            10,
            u128::from(u64::MAX),
            u128::from(u64::MAX) + 1,
            u128::MAX,
        ] {
            let (mut a, mut b) = ([1 as c_char; 40], [1 as c_char; 40]);
            put_u128(&mut a, v);
            put(&mut b, &v.to_string());
            assert_eq!(a, b, "{v}");
        }
    }
}
