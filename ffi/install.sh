#!/usr/bin/env bash
# Installs the C library: PREFIX/lib/libshmfifo.{so,a}, PREFIX/include/shmfifo.h and
# PREFIX/lib/pkgconfig/shmfifo.pc. Then: PKG_CONFIG_PATH=PREFIX/lib/pkgconfig
# cc prog.c $(pkg-config --cflags --libs shmfifo).
#
# Usage: ffi/install.sh PREFIX [BUILT_LIB_DIR]
# Without BUILT_LIB_DIR it builds the release library first (cargo build --release -p shmfifo-ffi).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
prefix="${1:?usage: ffi/install.sh PREFIX [BUILT_LIB_DIR]}"
built="${2:-}"
if [ -z "$built" ]; then
    (cd "$here/.." && cargo build --release -p shmfifo-ffi)
    built="$here/../target/release"
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -1)"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
cp "$built/libshmfifo.so" "$built/libshmfifo.a" "$prefix/lib/"
cp "$here/include/shmfifo.h" "$prefix/include/"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" "$here/shmfifo.pc.in" \
    > "$prefix/lib/pkgconfig/shmfifo.pc"
echo "installed shmfifo $version into $prefix"
