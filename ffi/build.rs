//! Gives the shared library its SONAME, `libshmfifo.so.MAJOR`, so that programs record the
//! major version they were linked against and `ffi/install.sh` can install the versioned file
//! with its symlinks, as distributions do.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets the version");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libshmfifo.so.{major}");
    println!("cargo:rerun-if-changed=build.rs");
}
