//! Copying taken messages out of the arena into [`Message`]s ([`fill`]), the check of each
//! group id against its entry's keyed hash ([`Filler`]), and the record of the id a buffer
//! checked last ([`CheckedGroup`]): what every receive, replay and peek does with a message
//! the protocol hands it.

use super::framing;
use super::types::*;
use crate::config::MAX_ATTRIBUTES;
use crate::protocol::message::{self, MAX_ID_LEN};
use crate::protocol::receive::Taken;

/// Copies taken messages into [`Message`]s ([`fill`]) and checks each group id against the
/// keyed hash its entry was inserted with, once per group entry in a row: a corrupted id word
/// would otherwise hand one group's messages out under another group's id (two groups of one
/// id, each with its own in-flight exclusion). A mismatch makes the message unreadable, so it
/// is quarantined: the damage stays in the group whose entry it is.
pub(super) struct Filler {
    /// The queue's bodies are any bytes (`BodyMode::Binary`).
    binary: bool,
    nonce: u64,
    created_wall_ms: u64,
    keys: (u64, u64),
    /// The group entry whose id was checked last (its address), 0 for none.
    checked: usize,
}

impl Filler {
    pub(super) fn new(inner: &super::queue::Inner) -> Self {
        Filler {
            binary: inner.binary,
            nonce: inner.nonce,
            created_wall_ms: inner.created_wall_ms,
            keys: inner.keys,
            checked: 0,
        }
    }

    /// [`fill`], then the group id check.
    pub(super) fn fill(
        &mut self,
        m: &mut Message,
        t: &Taken<'_>,
    ) -> std::result::Result<(), &'static str> {
        self.fill_with(m, t, true, &mut CheckedGroup::default())
            .map(|_| ())
    }

    /// [`fill`] (the body copied or not), then the group id check (`seen`: the id last
    /// checked where the message lands, a buffer's); returns the body's length. Always
    /// inlined (into the receive's sink, a replay's and a peek's): its call cost some 12
    /// instructions a message.
    #[inline(always)]
    fn fill_with(
        &mut self,
        m: &mut Message,
        t: &Taken<'_>,
        copy_body: bool,
        seen: &mut CheckedGroup,
    ) -> std::result::Result<usize, &'static str> {
        let body = match (copy_body, self.binary) {
            (false, _) => Body::InPlace,
            (true, false) => Body::Text,
            (true, true) => Body::Binary,
        };
        let body_len = fill(m, t, self.nonce, self.created_wall_ms, body)?;
        let at = t.group_entry();
        if at != self.checked {
            let (id, hash) = (m.group_id.as_bytes(), t.group_hash());
            if !seen.holds(self.keys, hash, id) {
                if super::hashing::group_hash(self.keys, id) != hash {
                    return Err("group id does not match its hash");
                }
                seen.set(self.keys, hash, id);
            }
            self.checked = at;
        }
        Ok(body_len)
    }

    /// [`Filler::fill`] into the next message of `buf`; an unreadable message (the protocol
    /// quarantines it) leaves `buf` as it was. Always inlined into the receive's sink, its
    /// only caller (left to the compiler it was sometimes not: 8 instructions a message).
    #[inline(always)]
    pub(super) fn fill_next(
        &mut self,
        buf: &mut ReceiveBuffer,
        t: &Taken<'_>,
    ) -> std::result::Result<(), &'static str> {
        let k = buf.len;
        let borrow = buf.borrow;
        let (m, seen) = buf.next_slot();
        let r = self.fill_with(m, t, !borrow, seen);
        match r {
            Err(_) => buf.len = k,
            Ok(body_len) if borrow => {
                if let Some(v) = buf.views.get_mut(k) {
                    *v = super::borrow::View::of(t, body_len);
                }
            }
            Ok(_) => {}
        }
        r.map(|_| ())
    }
}

/// The group id a buffer's receives last checked against its group entry's hash (with the
/// arena's keys and that hash): a receive of the same group again into the same buffer (a
/// consumer of one group, a message at a time: each receive checks its first group anew)
/// compares the id, a few instructions, instead of hashing it (SipHash, or the thread's
/// memo: some 70). The bytes compared are the message's own, copied out of the arena.
#[derive(Clone)]
pub(crate) struct CheckedGroup {
    keys: (u64, u64),
    hash: u64,
    /// `usize::MAX`: none.
    len: usize,
    id: [u8; MAX_ID_LEN],
}

impl Default for CheckedGroup {
    fn default() -> Self {
        CheckedGroup {
            keys: (0, 0),
            hash: 0,
            len: usize::MAX,
            id: [0; MAX_ID_LEN],
        }
    }
}

impl std::fmt::Debug for CheckedGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckedGroup")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl CheckedGroup {
    /// Whether `id` was checked last, under `keys`, against `hash`.
    #[inline(always)]
    fn holds(&self, keys: (u64, u64), hash: u64, id: &[u8]) -> bool {
        self.len == id.len()
            && self.hash == hash
            && self.keys == keys
            && self
                .id
                .get(..id.len())
                .is_some_and(|mine| same_bytes(mine, id))
    }

    /// Remembers `id` as checked under `keys` against `hash` (an id too long for the record
    /// is not remembered).
    fn set(&mut self, keys: (u64, u64), hash: u64, id: &[u8]) {
        match self.id.get_mut(..id.len()) {
            Some(mine) => {
                mine.copy_from_slice(id);
                (self.keys, self.hash, self.len) = (keys, hash, id.len());
            }
            None => self.len = usize::MAX,
        }
    }
}

/// Whether `a` and `b` hold the same bytes: 4 to 16 as two overlapping words each
/// (`validate::ends`; group ids are mostly short: no call of `bcmp`), fewer byte by byte,
/// longer ones as slices.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    match a.len() {
        17.. => a == b,
        4.. => crate::validate::ends(a) == crate::validate::ends(b),
        _ => a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0,
    }
}

/// How [`fill`] treats a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    /// Copied into `body`, checked as UTF-8 (a text queue).
    Text,
    /// Copied into `body_bytes` (and into `body` where it is UTF-8): a binary queue.
    Binary,
    /// Not copied (a borrowing receive reads it in place).
    InPlace,
}

/// Copies a taken message into `m`, reusing its allocations (the body as `body` says).
/// Returns the body's length. Errors name corrupted framing.
pub(super) fn fill(
    m: &mut Message,
    t: &Taken<'_>,
    nonce: u64,
    created_wall_ms: u64,
    body: Body,
) -> std::result::Result<usize, &'static str> {
    let lengths = t.lengths();
    let p = message::split(t.payload, lengths)?;
    let h = t.handle();
    m.message_id = if lengths.moved {
        // D8, M2: a dead-lettered message keeps its id, which is its dedup id.
        std::str::from_utf8(p.dedup)
            .ok()
            .and_then(|s| s.parse::<MessageId>().ok())
            .ok_or("moved message id")?
    } else {
        MessageId(message::id(nonce, h.idx, h.inc, h.member))
    };
    m.receipt_handle = ReceiptHandle {
        nonce,
        idx: h.idx,
        inc: h.inc,
        member: h.member,
        epoch: h.epoch,
    };
    // Shared bytes are copied first and the copy is validated: another process could change
    // them between a check in place and a copy. The destination's allocation is reused.
    fn set_text(dst: &mut String, src: &[u8]) -> std::result::Result<(), &'static str> {
        #[allow(unsafe_code)]
        // SAFETY: the string's bytes are UTF-8 again before it is used or this returns: it is
        // emptied, the copy is checked right after it is made (on the copy, not on the shared
        // bytes) and emptied again if it is not UTF-8. The copy's only way to fail is its
        // reservation, before any byte is copied (the string is empty then). Written in place,
        // the string is neither taken nor rebuilt (14 instructions a message).
        let v = unsafe { dst.as_mut_vec() };
        v.clear();
        v.extend_from_slice(src);
        // ASCII (the usual text) is checked a word or a vector at a time, and is UTF-8: short
        // text too (a dedup id of a few bytes: 59 instructions of UTF-8 decoding a message
        // before, where the ASCII look takes a few).
        if crate::validate::ascii(v) || std::str::from_utf8(v).is_ok() {
            return Ok(());
        }
        v.clear();
        Err("message text is not UTF-8")
    }
    m.body_bytes.clear();
    match body {
        Body::Text => set_text(&mut m.body, p.body)?,
        Body::Binary => {
            m.body_bytes.extend_from_slice(p.body);
            if set_text(&mut m.body, &m.body_bytes).is_err() {
                m.body.clear(); // not UTF-8: `body_bytes` only
            }
        }
        Body::InPlace => m.body.clear(),
    }
    // A reused buffer mostly holds this group's id already: equal bytes are that valid text,
    // and neither copy nor check is needed (compared in place, word by word).
    if !t.group_id_is(m.group_id.as_bytes()) {
        let mut id = [0u8; MAX_ID_LEN];
        let n = t.group_id(&mut id);
        set_text(&mut m.group_id, &id[..n])?;
    }
    if p.dedup.is_empty() {
        m.dedup_id = None;
    } else {
        set_text(m.dedup_id.get_or_insert_with(String::new), p.dedup)?;
    }
    if p.source.is_empty() {
        m.dead_letter_source = None;
    } else {
        set_text(
            m.dead_letter_source.get_or_insert_with(String::new),
            p.source,
        )?;
    }
    m.sequence_number = t.sequence_number();
    // The enqueue's arena time on the creation's wall clock: stable across receives (M3),
    // immune to wall-clock steps after creation, within 1 ms of the wall clock otherwise.
    // Arena time 1 is the creation instant (see `now_ms`).
    m.sent_timestamp = created_wall_ms.saturating_add(t.sent_ms().saturating_sub(1));
    m.first_receive_timestamp = t.first_receive_ms();
    m.receive_count = t.receive_count;
    let mut k = 0;
    for d in framing::decode(p.attrs) {
        let (name, data_type, value) = d?;
        if k >= MAX_ATTRIBUTES {
            return Err("attribute framing");
        }
        if m.attributes.len() == k {
            m.attributes.push(ReceivedAttribute::default());
        }
        let at = &mut m.attributes[k];
        set_text(&mut at.name, name)?;
        set_text(&mut at.data_type, data_type)?;
        at.value.clear();
        at.value.extend_from_slice(value);
        k += 1;
    }
    m.attributes.truncate(k);
    Ok(p.body.len())
}

#[cfg(test)]
mod tests {
    use super::{same_bytes, CheckedGroup, MAX_ID_LEN};

    /// The short comparison finds a difference at every byte of every length it handles (and
    /// past them); a remembered id holds only for its own bytes, keys and hash, and an id too
    /// long for the record is never remembered.
    #[test]
    fn a_checked_group_holds_for_its_own_id_keys_and_hash_only() {
        for n in 0..=20usize {
            let a: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37) ^ 0x5a).collect();
            assert!(same_bytes(&a, &a.clone()), "{n} bytes, equal");
            for at in 0..n {
                let mut b = a.clone();
                b[at] ^= 1 << (at % 8);
                assert!(!same_bytes(&a, &b), "{n} bytes, differing at {at}");
            }
            if n > 0 {
                assert!(!same_bytes(&a, &a[..n - 1]), "{n} bytes against {}", n - 1);
            }
        }
        let mut c = CheckedGroup::default();
        assert!(!c.holds((0, 0), 0, b""), "nothing remembered yet");
        c.set((1, 2), 7, b"group-a");
        assert!(c.holds((1, 2), 7, b"group-a"));
        assert!(!c.holds((1, 2), 8, b"group-a"), "another hash");
        assert!(!c.holds((1, 3), 7, b"group-a"), "other keys");
        assert!(!c.holds((1, 2), 7, b"group-b"), "another id");
        assert!(!c.holds((1, 2), 7, b"group-"), "a prefix");
        c.set((1, 2), 7, &[b'x'; MAX_ID_LEN + 1]);
        assert!(
            !c.holds((1, 2), 7, &[b'x'; MAX_ID_LEN + 1]),
            "too long to remember"
        );
        assert!(!c.holds((1, 2), 7, b"group-a"), "forgotten");
    }
}
