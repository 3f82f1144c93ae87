//! The keyed hashes of the shared tables' keys: group ids, dedup keys (and, through
//! [`hash_id`], attempt ids), with the arena's SipHash key, specified byte for byte so that every
//! build and process agrees; and the content-based dedup id (D5).

use std::hash::Hasher;

use crate::protocol::group::Found;
use crate::protocol::message::MAX_ID_LEN;

/// SipHash-2-4 of `id` with the arena's key `keys`.
pub(super) fn hash_id(keys: (u64, u64), id: &[u8]) -> u64 {
    let mut h = siphasher::sip::SipHasher24::new_with_keys(keys.0, keys.1);
    h.write(id);
    h.finish()
}

/// The last group id this thread hashed, with the keys and the hash, and where this thread's
/// last send of it found its group (see [`group_key`]).
struct LastGroup {
    keys: (u64, u64),
    /// `usize::MAX`: none yet.
    len: usize,
    hash: u64,
    found: Option<Found>,
    id: [u8; MAX_ID_LEN],
}

std::thread_local! {
    static LAST_GROUP: std::cell::RefCell<LastGroup> = const {
        std::cell::RefCell::new(LastGroup {
            keys: (0, 0),
            len: usize::MAX,
            hash: 0,
            found: None,
            id: [0; MAX_ID_LEN],
        })
    };
}

/// A group id's keyed hash ([`hash_id`]) and, if this thread's last send of it said where it
/// found its group ([`remember_group`]), where: a send passes it on (`Outgoing::group_hint`),
/// and the protocol tries it before a lookup.
#[derive(Debug, Clone, Copy)]
pub(super) struct GroupKey {
    /// The keyed hash.
    pub(super) hash: u64,
    /// Where the group was found last.
    pub(super) found: Option<Found>,
}

impl GroupKey {
    /// The key a message description carries.
    pub(super) fn of(o: &crate::protocol::send::Outgoing<'_>) -> GroupKey {
        GroupKey {
            hash: o.hash,
            found: o.group_hint,
        }
    }
}

/// [`hash_id`] of a group id, remembered per thread for the last id: the hash is a pure
/// function of the arena's keys and the id, so a send or receive of the same group as the
/// thread's previous one compares the id (a few instructions) instead of hashing it again
/// (SipHash: some 150). With it, where the thread's last send of that id found its group
/// ([`GroupKey::found`]; `UNPLACED` for an id sent again before its place is known). Nothing
/// shared, nothing to invalidate: a place that no longer holds is found out by the protocol,
/// which then looks the group up.
pub(super) fn group_key(keys: (u64, u64), id: &[u8]) -> GroupKey {
    if id.len() > MAX_ID_LEN {
        return GroupKey {
            hash: hash_id(keys, id),
            found: None,
        };
    }
    LAST_GROUP.with(|cell| {
        let Ok(mut l) = cell.try_borrow_mut() else {
            // Re-entered (not by this module): hash without the memo.
            return GroupKey {
                hash: hash_id(keys, id),
                found: None,
            };
        };
        if l.len == id.len() && l.keys == keys && l.id[..id.len()] == *id {
            // An id sent again whose place is not known yet asks for it (`UNPLACED`, which
            // the protocol finds nothing at); a new id does not: a thread that sends each id
            // once (a new group a message) never remembers one.
            return GroupKey {
                hash: l.hash,
                found: Some(l.found.unwrap_or(Found::UNPLACED)),
            };
        }
        let hash = hash_id(keys, id);
        l.keys = keys;
        l.id[..id.len()].copy_from_slice(id);
        l.len = id.len();
        l.hash = hash;
        l.found = None;
        GroupKey { hash, found: None }
    })
}

/// [`group_key`]'s hash alone.
pub(super) fn group_hash(keys: (u64, u64), id: &[u8]) -> u64 {
    group_key(keys, id).hash
}

/// Remembers where a send found the group whose id has keyed hash `hash` under `keys`, if
/// that id is still the thread's memo (a send calls it only when the place changed: once a
/// group, not once a message). The id itself is not compared: a place kept for another id of
/// the same hash is only a hint, which the protocol checks against the entry's id.
pub(super) fn remember_group(keys: (u64, u64), hash: u64, found: Found) {
    LAST_GROUP.with(|cell| {
        if let Ok(mut l) = cell.try_borrow_mut() {
            if l.len != usize::MAX && l.keys == keys && l.hash == hash {
                l.found = Some(found);
            }
        }
    });
}

/// The keyed hash of a dedup key: SipHash-2-4-128 over `[b'D', group_len] ‖ group ‖ dedup`
/// (the group is empty with queue scope), as `(low, high)` 64 bits: the low half places the
/// key in the table, both stand for it in its entry (layout 15). Specified byte for byte, so
/// every build agrees.
pub(super) fn hash_dedup(keys: (u64, u64), group: &[u8], dedup: &[u8]) -> (u64, u64) {
    let mut buf = [0u8; 2 + 2 * MAX_ID_LEN];
    let (g, d) = (group.len().min(MAX_ID_LEN), dedup.len().min(MAX_ID_LEN));
    buf[0] = b'D';
    buf[1] = g as u8;
    buf[2..2 + g].copy_from_slice(&group[..g]);
    buf[2 + g..2 + g + d].copy_from_slice(&dedup[..d]);
    let mut h = siphasher::sip128::SipHasher24::new_with_keys(keys.0, keys.1);
    h.write(&buf[..2 + g + d]);
    let h = siphasher::sip128::Hasher128::finish128(&h);
    (h.h1, h.h2)
}

/// Lowercase hex of the SHA-256 of `body` (the content-based dedup id, D5).
pub(super) fn content_dedup_id(body: &[u8]) -> [u8; 64] {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(body);
    let mut out = [0u8; 64];
    for (i, b) in digest.iter().enumerate() {
        out[2 * i] = b"0123456789abcdef"[usize::from(b >> 4)];
        out[2 * i + 1] = b"0123456789abcdef"[usize::from(b & 15)];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pinned SipHash-2-4 test vector (key 00..0f, message 00..0e) from the SipHash paper:
    /// every build and process must hash group ids identically.
    #[test]
    fn siphash_test_vector() {
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(hash_id((k0, k1), &msg), 0xa129_ca61_49be_45e5);
    }
}
