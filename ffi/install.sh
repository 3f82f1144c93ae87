#!/usr/bin/env bash
# Installs the C library as distributions lay it out:
#
#   $DESTDIR$LIBDIR/libshmfifo.so.X.Y.Z     the shared library, stripped, SONAME libshmfifo.so.X
#   $DESTDIR$LIBDIR/libshmfifo.so.X         -> libshmfifo.so.X.Y.Z (what programs load)
#   $DESTDIR$LIBDIR/libshmfifo.so           -> libshmfifo.so.X     (what `-lshmfifo` links)
#   $DESTDIR$LIBDIR/libshmfifo.a            the static library (debug info stripped)
#   $DESTDIR$DEBUGDIR/libshmfifo.so.X.Y.Z.debug   the split-off debug info (found by gdb
#                                           through the library's .gnu_debuglink)
#   $DESTDIR$INCLUDEDIR/shmfifo.h
#   $DESTDIR$LIBDIR/pkgconfig/shmfifo.pc    (its prefix is PREFIX, never DESTDIR)
#
# Variables (environment), as in autotools and cargo-c:
#   PREFIX      default /usr/local
#   LIBDIR      default $PREFIX/lib
#   INCLUDEDIR  default $PREFIX/include
#   DEBUGDIR    default $LIBDIR/.debug (gdb looks there; distributions use /usr/lib/debug$LIBDIR)
#   DESTDIR     staging root for packaging, default empty
#
# Usage: [PREFIX=...] [DESTDIR=...] ffi/install.sh [PREFIX] [BUILT_LIB_DIR]
# A first argument sets PREFIX (as earlier versions of this script took it).
#
# Without BUILT_LIB_DIR the library is taken from cargo's release directory: $CARGO_TARGET_DIR
# (relative to the current directory, as cargo reads it) or, when it is unset, the target
# directory cargo reports (`cargo metadata`: build.target-dir of a config file included), else
# target/ beside this script. A library there that is newer than every source it is built from
# is installed as it is, without cargo: so `cargo build --release -p shmfifo-ffi` as yourself,
# then `sudo bash ffi/install.sh` (where cargo is not on root's PATH, and a build as root would
# leave root-owned files in your target directory) works. Otherwise it is built first, with
# $CARGO, cargo on the PATH, or ~/.cargo/bin/cargo (the invoking user's under sudo); never as
# root under sudo (it says what to run instead). sudo drops CARGO_TARGET_DIR from the
# environment: pass it on (`sudo CARGO_TARGET_DIR=... bash ffi/install.sh`) or give
# BUILT_LIB_DIR.
#
# Then: PKG_CONFIG_PATH=$LIBDIR/pkgconfig cc prog.c $(pkg-config --cflags --libs shmfifo);
# run `ldconfig` after installing into a system directory, or set LD_LIBRARY_PATH for others.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"

# Sets `cargo`: $CARGO, cargo on the PATH, or ~/.cargo/bin/cargo (under sudo, the invoking
# user's, run with that user's rustup and cargo homes); empty when there is none.
find_cargo() {
    cargo=""
    if [ -n "${CARGO:-}" ] && [ -x "$CARGO" ]; then cargo="$CARGO"; return; fi
    if command -v cargo >/dev/null 2>&1; then cargo="$(command -v cargo)"; return; fi
    local home="${HOME:-}"
    if [ -n "${SUDO_USER:-}" ] && command -v getent >/dev/null 2>&1; then
        home="$(getent passwd "$SUDO_USER" | cut -d: -f6)"
    fi
    if [ -n "$home" ] && [ -x "$home/.cargo/bin/cargo" ]; then
        cargo="$home/.cargo/bin/cargo"
        export RUSTUP_HOME="${RUSTUP_HOME:-$home/.rustup}" CARGO_HOME="${CARGO_HOME:-$home/.cargo}"
    fi
}

# Cargo's target directory for this workspace (see the usage above).
target_dir() {
    if [ -n "${CARGO_TARGET_DIR:-}" ]; then
        case "$CARGO_TARGET_DIR" in /*) echo "$CARGO_TARGET_DIR" ;; *) echo "$PWD/$CARGO_TARGET_DIR" ;; esac
        return
    fi
    local dir=""
    if [ -n "$cargo" ]; then
        dir="$(cd "$root" && "$cargo" metadata --format-version 1 --no-deps 2>/dev/null \
            | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')" || dir=""
    fi
    echo "${dir:-$root/target}"
}

# The first source of the library newer than $1 (none: $1 is up to date).
newer_source() {
    find "$root/src" "$root/ffi/src" "$root/ffi/build.rs" "$root/ffi/Cargo.toml" \
        "$root/Cargo.toml" "$root/Cargo.lock" -type f -newer "$1" -print -quit 2>/dev/null || true
}
if [ -n "${1:-}" ]; then PREFIX="$1"; fi
PREFIX="${PREFIX:-/usr/local}"
LIBDIR="${LIBDIR:-$PREFIX/lib}"
INCLUDEDIR="${INCLUDEDIR:-$PREFIX/include}"
DEBUGDIR="${DEBUGDIR:-$LIBDIR/.debug}"
DESTDIR="${DESTDIR:-}"
built="${2:-}"
case "$PREFIX" in /*) ;; *) echo "install.sh: PREFIX must be absolute: $PREFIX" >&2; exit 2 ;; esac
if [ -z "$built" ]; then
    find_cargo
    target="$(target_dir)"
    built="$target/release"
    stale=""
    if [ ! -f "$built/libshmfifo.so" ] || [ ! -f "$built/libshmfifo.a" ]; then
        stale="$built/libshmfifo.so does not exist"
    else
        src="$(newer_source "$built/libshmfifo.so")"
        if [ -n "$src" ]; then stale="$src is newer than $built/libshmfifo.so"; fi
    fi
    if [ -n "$stale" ]; then
        build="cargo build --release -p shmfifo-ffi"
        if [ -z "$cargo" ]; then
            echo "install.sh: $stale, and cargo is not found (\$CARGO, PATH, ~/.cargo/bin):" \
                "run \`$build\` first, or give CARGO=/path/to/cargo" >&2
            exit 1
        fi
        if [ "$(id -u)" = 0 ] && [ -n "${SUDO_USER:-}" ]; then
            echo "install.sh: $stale; not building as root under sudo (it would leave" \
                "root-owned files in $target): run \`$build\` as $SUDO_USER first" >&2
            exit 1
        fi
        (cd "$root" && CARGO_TARGET_DIR="$target" "$cargo" build --release -p shmfifo-ffi)
    fi
fi
for tool in objcopy readelf; do
    command -v "$tool" >/dev/null || { echo "install.sh: $tool (binutils) is needed" >&2; exit 2; }
done
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -1)"
major="${version%%.*}"
soname="libshmfifo.so.$major"
real="libshmfifo.so.$version"

# The library must carry the SONAME that the links below provide (set by ffi/build.rs).
found="$(readelf -d "$built/libshmfifo.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
if [ "$found" != "$soname" ]; then
    echo "install.sh: $built/libshmfifo.so has SONAME '${found}', expected $soname (rebuild it)" >&2
    exit 1
fi

lib="$DESTDIR$LIBDIR"
mkdir -p "$lib/pkgconfig" "$DESTDIR$INCLUDEDIR" "$DESTDIR$DEBUGDIR"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$built/libshmfifo.so" "$tmp/$real"
# Split the debug info off, strip, and link the two (the debuglink names the file and its CRC).
objcopy --only-keep-debug "$tmp/$real" "$tmp/$real.debug"
objcopy --strip-unneeded --remove-section=.comment "$tmp/$real"
(cd "$tmp" && objcopy --add-gnu-debuglink="$real.debug" "$real")
install -m 0755 "$tmp/$real" "$lib/$real"
install -m 0644 "$tmp/$real.debug" "$DESTDIR$DEBUGDIR/$real.debug"
ln -sfn "$real" "$lib/$soname"
ln -sfn "$soname" "$lib/libshmfifo.so"
cp "$built/libshmfifo.a" "$tmp/libshmfifo.a"
objcopy --strip-debug "$tmp/libshmfifo.a"
install -m 0644 "$tmp/libshmfifo.a" "$lib/libshmfifo.a"
install -m 0644 "$here/include/shmfifo.h" "$DESTDIR$INCLUDEDIR/shmfifo.h"
sed -e "s|@PREFIX@|$PREFIX|" -e "s|@LIBDIR@|$LIBDIR|" -e "s|@INCLUDEDIR@|$INCLUDEDIR|" \
    -e "s|@VERSION@|$version|" "$here/shmfifo.pc.in" > "$lib/pkgconfig/shmfifo.pc"
chmod 0644 "$lib/pkgconfig/shmfifo.pc"
echo "installed shmfifo $version ($soname) into ${DESTDIR}$PREFIX"
