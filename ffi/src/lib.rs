//! C ABI of shmfifo (`libshmfifo.so` / `libshmfifo.a`).
//!
//! This first cut exports the version functions; the queue operations, the committed header and
//! the C tests follow (see `ffi/README.md` once it exists).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

/// The library version as a NUL-terminated string (static storage; never free it).
#[no_mangle]
pub extern "C" fn shmfifo_version() -> *const core::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The arena layout version this library reads and writes; arenas of another layout version
/// are refused by `open`.
#[no_mangle]
pub extern "C" fn shmfifo_layout_version() -> u64 {
    shmfifo::LAYOUT_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        // SAFETY: the pointer is to a static NUL-terminated string.
        let v = unsafe { core::ffi::CStr::from_ptr(shmfifo_version()) };
        assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        assert_eq!(shmfifo_layout_version(), shmfifo::LAYOUT_VERSION);
    }
}
