//! Message attribute framing in a slot's payload: per attribute a frame of
//! `[name_len:u16][type_len:u16][value_len:u32]` (little-endian), then the name, the type and
//! the value. Encoded by `send`, decoded by `receive` (copying out) and by the dead-letter
//! mover (measuring a moved message as `send` measured it), all through this module.

use crate::config::ATTRIBUTE_FRAMING;

/// The frame of one attribute with these lengths (checked by `send`: names and types are at
/// most 256 bytes, values at most the message size).
pub(super) fn frame(name: usize, data_type: usize, value: usize) -> [u8; ATTRIBUTE_FRAMING] {
    let mut f = [0u8; ATTRIBUTE_FRAMING];
    f[0..2].copy_from_slice(&(name as u16).to_le_bytes());
    f[2..4].copy_from_slice(&(data_type as u16).to_le_bytes());
    f[4..8].copy_from_slice(&(value as u32).to_le_bytes());
    f
}

/// One decoded attribute: name, data type and value bytes (copy them before trusting them:
/// the arena is shared).
pub(super) type Decoded<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// The attributes framed in `attrs`, in order; an `Err` (then nothing more) where the framing
/// does not parse, which only corruption makes.
pub(super) fn decode(attrs: &[u8]) -> impl Iterator<Item = Result<Decoded<'_>, &'static str>> {
    let mut rest = Some(attrs);
    core::iter::from_fn(move || {
        let a = rest.take()?;
        if a.is_empty() {
            return None;
        }
        let Some((f, body)) = a.split_at_checked(ATTRIBUTE_FRAMING) else {
            return Some(Err("attribute framing"));
        };
        let nl = usize::from(u16::from_le_bytes([f[0], f[1]]));
        let tl = usize::from(u16::from_le_bytes([f[2], f[3]]));
        let vl = u32::from_le_bytes([f[4], f[5], f[6], f[7]]) as usize;
        let Some(end) = nl.checked_add(tl).and_then(|x| x.checked_add(vl)) else {
            return Some(Err("attribute framing"));
        };
        if end > body.len() {
            return Some(Err("attribute framing"));
        }
        rest = Some(&body[end..]);
        Some(Ok((&body[..nl], &body[nl..nl + tl], &body[nl + tl..end])))
    })
}

/// The size SQS counts for stored attributes (names, types and values; not our per-attribute
/// framing). Framing that does not parse (corruption) counts whole.
pub(super) fn attr_size(attrs: &[u8]) -> usize {
    let mut size = 0;
    for d in decode(attrs) {
        match d {
            Ok((n, t, v)) => size += n.len() + t.len() + v.len(),
            Err(_) => return attrs.len(),
        }
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_corruption_is_reported() {
        let mut buf = Vec::new();
        for (n, t, v) in [("a", "String", "x"), ("bb", "Binary", "")] {
            buf.extend_from_slice(&frame(n.len(), t.len(), v.len()));
            buf.extend_from_slice(n.as_bytes());
            buf.extend_from_slice(t.as_bytes());
            buf.extend_from_slice(v.as_bytes());
        }
        let got: Vec<_> = decode(&buf).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            got,
            [
                (&b"a"[..], &b"String"[..], &b"x"[..]),
                (&b"bb"[..], &b"Binary"[..], &b""[..])
            ]
        );
        assert_eq!(attr_size(&buf), 1 + 6 + 1 + 2 + 6);
        // A length past the end: an error, and the whole counts.
        buf[4] = 200;
        assert!(decode(&buf).any(|d| d.is_err()));
        assert_eq!(attr_size(&buf), buf.len());
        assert_eq!(decode(&[1, 2, 3]).next(), Some(Err("attribute framing")));
    }
}
