//! The MD5 digests SQS puts in its answers (`MD5OfMessageBody`, `MD5OfBody`,
//! `MD5OfMessageAttributes`), which SDKs check: shared by the server and the CLI's JSON.

use md5::{Digest, Md5};

/// Lowercase hex MD5 of `b`.
pub fn md5_hex(b: &[u8]) -> String {
    let d = Md5::digest(b);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// SQS's `MD5OfMessageAttributes` of `(name, data type, value)` attributes: over the
/// attributes sorted by name, each its length-prefixed name and data type, a transport byte
/// (1 text, 2 binary) and the length-prefixed value.
pub fn md5_of_attributes<'a>(
    attrs: impl IntoIterator<Item = (&'a str, &'a str, &'a [u8])>,
) -> String {
    let mut sorted: Vec<(&str, &str, &[u8])> = attrs.into_iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut buf = Vec::new();
    for (name, t, v) in sorted {
        for part in [name.as_bytes(), t.as_bytes()] {
            buf.extend_from_slice(&(part.len() as u32).to_be_bytes());
            buf.extend_from_slice(part);
        }
        buf.push(if t.starts_with("Binary") { 2 } else { 1 });
        buf.extend_from_slice(&(v.len() as u32).to_be_bytes());
        buf.extend_from_slice(v);
    }
    md5_hex(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_of_attributes_is_sqss() {
        // One String attribute "a" = "x", byte by byte: len+name, len+type, 1, len+value.
        let raw = b"\x00\x00\x00\x01a\x00\x00\x00\x06String\x01\x00\x00\x00\x01x";
        assert_eq!(
            md5_of_attributes([("a", "String", &b"x"[..])]),
            md5_hex(raw)
        );
        assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    }
}
