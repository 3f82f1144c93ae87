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
# A first argument sets PREFIX (as earlier versions of this script took it). Without
# BUILT_LIB_DIR it builds the release library first (cargo build --release -p shmfifo-ffi).
# Then: PKG_CONFIG_PATH=$LIBDIR/pkgconfig cc prog.c $(pkg-config --cflags --libs shmfifo);
# run `ldconfig` after installing into a system directory, or set LD_LIBRARY_PATH for others.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ -n "${1:-}" ]; then PREFIX="$1"; fi
PREFIX="${PREFIX:-/usr/local}"
LIBDIR="${LIBDIR:-$PREFIX/lib}"
INCLUDEDIR="${INCLUDEDIR:-$PREFIX/include}"
DEBUGDIR="${DEBUGDIR:-$LIBDIR/.debug}"
DESTDIR="${DESTDIR:-}"
built="${2:-}"
case "$PREFIX" in /*) ;; *) echo "install.sh: PREFIX must be absolute: $PREFIX" >&2; exit 2 ;; esac
if [ -z "$built" ]; then
    (cd "$here/.." && cargo build --release -p shmfifo-ffi)
    built="$here/../target/release"
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
