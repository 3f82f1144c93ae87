//! Message attribute framing in a slot's payload.

use crate::config::ATTRIBUTE_FRAMING;

/// The size SQS counts for stored attributes (names, types and values; not our per-attribute
/// framing). Framing that does not parse (corruption) counts whole.
pub(super) fn attr_size(attrs: &[u8]) -> usize {
    let (mut at, mut frames) = (0usize, 0usize);
    while at < attrs.len() {
        let Some(f) = attrs.get(at..at + ATTRIBUTE_FRAMING) else {
            return attrs.len();
        };
        let name = usize::from(u16::from_le_bytes([f[0], f[1]]));
        let ty = usize::from(u16::from_le_bytes([f[2], f[3]]));
        let value = u32::from_le_bytes([f[4], f[5], f[6], f[7]]) as usize;
        at = at
            .saturating_add(ATTRIBUTE_FRAMING)
            .saturating_add(name)
            .saturating_add(ty)
            .saturating_add(value);
        frames += 1;
    }
    if at == attrs.len() {
        attrs.len() - frames * ATTRIBUTE_FRAMING
    } else {
        attrs.len()
    }
}
