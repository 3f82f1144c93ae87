//! The arena format: `#[repr(C)]` types, their encodings and the geometry arithmetic.
//!
//! All multi-byte integers are little-endian (the only supported targets are little-endian
//! Linux). Fields are fixed-width atomics; no pointer or `usize` is ever stored.
//!
//! ```text
//! offset 0              Header            (static settings, then hot lines, padded to 4 KiB)
//! segments_off = 4 KiB  u64 × (C_max+2) × S (segment directory, layout 13: per class, then
//!                                           the dedup table (layout 14), then the group table
//!                                           (layout 16), the file offsets of its added
//!                                           segments, S = MAX_SEGMENTS)
//! participants_off      Participant × P   (128 B each)
//! groups_off            GroupEntry × G    (256 B each, G a power of two = 2 × max groups)
//! ready_off             u64 × R           (ready-hint ring, R = G)
//! timers_off            u64 × 64 × (1 + W) (expiry wheel: 64 bucket minima, then 64 bucket
//!                                           bitmaps of W = ⌈G / 64⌉ words)
//! dedup_off             DedupEntry × D    (64 B each, D a power of two; D = 0: dedup off)
//! dedup_keys_off        u64 × D           (key words: the high half of each key's 128-bit hash)
//! attempts_off          AttemptEntry × A  (384 B each, A a power of two or 0)
//! class k, k < C:
//!   headers_off[k]      MsgHeader × N_k   (64 B each)
//!   payload_off[k]      [u8; stride_k] × N_k
//! total_size            rounded up to 4 KiB: the base file
//! segments              appended as size classes grow (layout 13), each page-aligned:
//!                       MsgHeader × n then [u8; stride_k] × n, n = N_k × 2^(j-1) for the
//!                       class's j-th segment; a dedup segment: DedupEntry × m then
//!                       u64 × m × K, m = D × 2^(j-1); a group segment: GroupEntry × m
//!                       then u64 × 64 × ⌈m / 64⌉ (its groups' expiry-wheel bitmaps), its
//!                       ready ring's head and tail (128 B each) and u64 × m (its ready
//!                       ring), m = G × 2^(j-1); where, the directory says
//! ```
#![cfg_attr(feature = "loom", allow(unreachable_pub, missing_docs))]

use crate::sync::{AtomicU32, AtomicU64};

/// Magic number at offset 0: `"SHMFIFO"` followed by a DOS end-of-file byte (as PNG's magic, it
/// catches text-mode mangling and `cat`).
pub const MAGIC: u64 = u64::from_le_bytes(*b"SHMFIFO\x1a");
/// Bumped on any change to the layout or to a protocol (27: a receive may serve the ready
/// ring's only hint in place, leaving it queued as a placeholder that the group's claim word
/// marks `STALE` (its bit 61, where the claim's incarnation had 24 bits, now 23); 26: the header's `dedup_mode` may be 3,
/// message-group scope with `FifoThroughputLimit=perMessageGroupId`, which layout 25 builds
/// would take for a corrupted header; 25: a delete holding its group's claim
/// marks a message deleted by a store, one without it by a CAS to `DELETED_UNCOUNTED`, counted
/// by the cleanup that removes it; 24: a group's ready-hint flag is its
/// claim word's `HINT` bit, cleared by the CAS that takes the claim, and its own word unused;
/// 23: a pack's members lie back to back
/// after its directory, where 22 started each member's body at a line; 22: a slot may hold a *pack*, the
/// messages of one group that one batch sends, behind a directory of [`MsgWords`] entries
/// (`lens` flag `LENS_PACKED`, see `protocol::pack`); message ids and receipt handles name a
/// member (`sf2` handles). 21: a participant record is 256 B,
/// its last two lines four per-thread stripes of the four hottest counters, each written by
/// one thread of the registered process with a plain load and store; and a ready ring's `head`
/// moves once a stride of 8 pops, pops starting at the later of `head` and their process's
/// pop cursor. 20: a receive counts a first receive
/// in the in-flight count through its `RECEIVED` and `VISIBILITY_EXPIRIES` counters only, not
/// in `Participant::in_flight` too. 19: a group its last delete emptied
/// stays `ACTIVE`, its list reopened at a new incarnation of its sentinel, whose position is
/// `GroupEntry::sentinel_pos`, in `home_claim`'s old place (moved to the key's line);
/// no kept tombstones. 18: a cleanup's `pending_free` names a run
/// of nodes freed last first, not one dummy).
pub const LAYOUT_VERSION: u64 = 27;
/// The most size classes an arena may have.
pub const MAX_CLASSES: usize = 8;
/// Bytes of message header in front of each payload (in its own array).
pub const MSG_HEADER_SIZE: usize = 64;
/// The most messages one pack holds (layout 22): a batch's ten (S11).
pub const MAX_PACK: usize = 10;
/// Bytes of a pack's directory entry for one member ([`MsgWords`]).
pub const PACK_MEMBER_SIZE: usize = 32;
/// Bytes of a group table entry.
pub const GROUP_ENTRY_SIZE: usize = 256;
/// Bytes of a dedup table entry (its key lives in a parallel array).
pub const DEDUP_ENTRY_SIZE: usize = 64;
/// Most segments a size class may add to the arena as it grows (layout 13): segment `k`
/// (from 1) holds `slots × 2^(k-1)` slots, so a class that has added `k` segments holds
/// `slots × 2^k`.
pub const MAX_SEGMENTS: usize = 24;
/// Kinds of segments: one per size class, then the dedup table's (layout 14), then the group
/// table's (layout 16).
pub const MAX_KINDS: usize = MAX_CLASSES + 2;
/// The segment kind of the dedup table (layout 14): its `k`-th added segment is a table of
/// `dedup_slots × 2^(k-1)` entries with their key words.
pub const DEDUP_KIND: usize = MAX_CLASSES;
/// The segment kind of the group table (layout 16): its `k`-th added segment is a table of
/// `group_slots × 2^(k-1)` entries with their expiry-wheel bitmaps.
pub const GROUP_KIND: usize = MAX_CLASSES + 1;
/// The most group entries an arena may hold, base table and added tables together (layout
/// 16): a group's index is a ready-ring value (24 bits), and its sentinel's node index
/// (`total + g`) stays below 2^32.
pub const MAX_GROUP_RANGE: u64 = 1 << 24;
/// Key words per dedup entry (layout 15): the high 64 bits of the key's 128-bit keyed hash,
/// whose low 64 bits are the entry's `hash` (before layout 15: the key's bytes, 16 or 32
/// words).
pub const DEDUP_KEY_WORDS: u32 = 1;
/// Bytes of a participant record.
pub const PARTICIPANT_SIZE: usize = 256;
/// Page granularity of the arena.
pub const PAGE: u64 = 4096;
/// Longest group id or dedup id (S2, S3).
pub const MAX_ID_LEN: usize = 128;
/// Buckets of the expiry wheel (layout 12, see `protocol::timers`).
pub const WHEEL_BUCKETS: usize = 64;
/// A deadline `d` (ms) falls in wheel bucket `(d >> WHEEL_SHIFT) % WHEEL_BUCKETS`: buckets of
/// 1,024 ms, the wheel turning once in about 65 s.
pub const WHEEL_SHIFT: u32 = 10;
/// Group table entries a periodic sweep looks at (see `Header::sweep_cursor`).
pub const SWEEP_CHUNK: u64 = 16_384;

/// Words of one expiry-wheel bucket's bitmap for a table of `group_slots` entries.
pub fn wheel_words(group_slots: u32) -> usize {
    wheel_words_of(group_slots as usize)
}

/// Words of one expiry-wheel bucket's bitmap for `entries` group entries (a base table, or an
/// added one, layout 16).
pub fn wheel_words_of(entries: usize) -> usize {
    entries.div_ceil(64)
}

/// `Header::state` while the creator is still writing the arena.
pub const STATE_INITIALISING: u64 = 0;
/// `Header::state` once the arena is ready; written last, with Release.
pub const STATE_READY: u64 = u64::from_le_bytes(*b"READY\0\0\0");

/// A value on its own 128-byte line (two 64-byte lines: adjacent-line prefetch).
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct Padded<T>(pub T);

/// The arena header. The static part is written once by the creator before `state`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: AtomicU64,
    /// [`LAYOUT_VERSION`].
    pub layout_version: AtomicU64,
    /// Size of the whole arena in bytes.
    pub total_size: AtomicU64,
    /// Hash algorithm id (1 = SipHash-2-4) for group ids.
    pub hash_alg: AtomicU64,
    /// SipHash key, random per arena.
    pub hash_k0: AtomicU64,
    /// SipHash key, second half.
    pub hash_k1: AtomicU64,
    /// Random arena nonce, part of every receipt handle and message id.
    pub nonce: AtomicU64,
    /// Boot id of the creating boot (128 bits).
    pub boot_id: [AtomicU64; 2],
    /// Wall-clock creation time, ms since the Unix epoch.
    pub created_wall_ms: AtomicU64,
    /// The arena clock, `[boot_tag:24][base_ms:40]`: arena time is `(CLOCK_MONOTONIC ms −
    /// base_ms) mod 2^40 + 1` on the boot whose id folds to `boot_tag`. The first opener on
    /// another boot rebases it (one CAS) so that arena time goes on from the wall-clock age
    /// of the arena, never backwards, and makes every in-flight message visible.
    pub clock: AtomicU64,
    /// Participant registry slots.
    pub participants: AtomicU64,
    /// Maximum number of active groups.
    pub max_groups: AtomicU64,
    /// Group table slots (power of two).
    pub group_slots: AtomicU64,
    /// Ready ring entries (power of two).
    pub ready_slots: AtomicU64,
    /// Number of size classes.
    pub class_count: AtomicU64,
    /// Payload capacity of each class.
    pub class_payload: [AtomicU64; MAX_CLASSES],
    /// Slot count of each class.
    pub class_slots: [AtomicU64; MAX_CLASSES],
    /// Maximum message size (body + attributes), bytes.
    pub max_message_size: AtomicU64,
    /// Default visibility timeout, ms. A live setting: loaded Relaxed by every receive.
    pub visibility_timeout_ms: AtomicU64,
    /// Default receive wait time, ms.
    pub receive_wait_ms: AtomicU64,
    /// Dedup mode: 0 off (no table), 1 queue scope, 2 message-group scope (D2), 3
    /// message-group scope with `FifoThroughputLimit=perMessageGroupId` (TP2).
    pub dedup_mode: AtomicU64,
    /// Dedup interval, ms (D1).
    pub dedup_interval_ms: AtomicU64,
    /// Dedup table entries (power of two; 0 with dedup off).
    pub dedup_slots: AtomicU64,
    /// Content-based dedup (D5): 0 or 1. A live setting: loaded Relaxed by every send.
    pub content_based_dedup: AtomicU64,
    /// Queue delay, ms (L1). A live setting, retroactive: a message is delayed while
    /// `now < sent + delay_ms` and it was never received.
    pub delay_ms: AtomicU64,
    /// Retention period, ms (T1). A live setting: a message is gone once `now >= sent +
    /// retention_ms`, visible or in flight.
    pub retention_ms: AtomicU64,
    /// In-flight limit (R8): most messages received and not yet deleted.
    pub max_in_flight: AtomicU64,
    /// Correction added to the participants' in-flight deltas (set by a census, wrapping).
    pub in_flight_fix: AtomicU64,
    /// [`STATE_INITIALISING`] or [`STATE_READY`]. SYNC POINT(arena-ready): stored last with
    /// Release by the creator, loaded with Acquire by `open`.
    pub state: AtomicU64,
    /// The futex doorbell and the number of sleeping receivers.
    pub wake: Padded<WakeLine>,
    /// Earliest visibility deadline (ms) that may make a group ready without an event.
    pub next_expiry: Padded<AtomicU64>,
    /// Time (ms) of the last sweep.
    pub last_sweep: Padded<AtomicU64>,
    /// Where the next periodic sweep starts in the group table (layout 12): each takes the
    /// next [`SWEEP_CHUNK`] entries (`fetch_add`), so a periodic sweep does bounded work on
    /// any table and consecutive ones cover it all.
    pub sweep_cursor: Padded<AtomicU64>,
    /// Counter from which each group incarnation takes its sequence-number base.
    pub group_seq: Padded<AtomicU64>,
    /// Number of group entries in use (inserting or active).
    pub active_groups: Padded<AtomicU64>,
    /// Ready ring consumer position (a hint, helped forward).
    pub ready_head: Padded<AtomicU64>,
    /// Ready ring producer position (a hint, helped forward).
    pub ready_tail: Padded<AtomicU64>,
    /// Arena time (ms) of the last in-flight census.
    pub census: Padded<CensusLine>,
    /// The redrive policy (X1), a live setting in two buffers, see `protocol::settings`.
    pub redrive: RedriveControl,
    /// ReceiveRequestAttemptId records (R11): entries (a power of two, or 0: none).
    pub attempt_slots: AtomicU64,
    /// Release a dead receiver's in-flight messages at once (1, the default) or leave them to
    /// their visibility timeout (0). Fixed at creation.
    pub release_on_death: AtomicU64,
    /// Arena time (ms) of the last liveness check (one checker per period, by CAS).
    pub liveness: Padded<AtomicU64>,
    /// What a send does when every dedup entry it may use holds a key accepted within the
    /// interval: 0 evicts the oldest (the effective window shortens, counted in `dedup_evict`),
    /// 1 refuses the send (`DedupTableFull`). Fixed at creation.
    pub dedup_overflow: AtomicU64,
    /// Dedup evictions: how many, and when and at what age the last one happened.
    pub dedup_evict: Padded<EvictLine>,
    /// The permission bits its creator asked for: an open refuses a file whose bits are wider
    /// (someone widened them since). Fixed at creation.
    pub mode: AtomicU64,
    /// Messages and groups quarantined (taken out of the queue because a corrupted word made
    /// them unreadable or their list unwalkable; see `protocol::quarantine`).
    pub quarantine: Padded<QuarantineLine>,
    /// 0: arena time is `CLOCK_MONOTONIC` (see `clock`); 1: a test clock (layout 8), arena
    /// time is `test_now`, moved only by `Queue::advance_clock`. Fixed at creation.
    pub clock_mode: AtomicU64,
    /// The test clock's arena time (ms, from 1), when `clock_mode` is 1: loaded Acquire by
    /// every operation, moved forward by `fetch_add` (never back).
    pub test_now: Padded<AtomicU64>,
    /// The space doorbell (layout 9): producers waiting for a slot (`Queue::send_timeout`)
    /// sleep on `doorbell`, counted in `waiters`; whoever frees a slot while one is counted
    /// rings it (SYNC POINT(space-doorbell)).
    pub space: Padded<WakeLine>,
    /// 0: bodies are SQS text (S7, checked on send); 1: any bytes (layout 11).
    /// Fixed at creation.
    pub body_mode: AtomicU64,
    /// Per size class, the slot freed last (index + 1; 0: none), a hint for producers of
    /// large classes (payload of at least `protocol::pool::HINT_MIN_CAP`) to reuse a slot
    /// whose lines are still cached instead of walking the whole class. Written
    /// only for those classes, so the small messages' hot path never touches this line.
    pub free_hint: Padded<[AtomicU64; MAX_CLASSES]>,
    /// Receives that returned no message (CloudWatch's `NumberOfEmptyReceives`): a long poll
    /// that ends empty adds itself; polls that do not wait are tallied by their handle and
    /// added 64 at a time. Appended in the header's spare page: an arena made before it reads 0.
    pub empty_receives: Padded<AtomicU64>,
    /// The arena's growth (layout 13, see `protocol::grow`): the grow claim and each class's
    /// published segments.
    pub grow: Padded<GrowLine>,
    /// Per size class, the most segments it may add (fixed at creation: with the size limit,
    /// it fixes the class's index range).
    pub class_growth: [AtomicU64; MAX_CLASSES],
    /// The size limit (bytes): the arena's file never grows past it. Fixed at creation.
    pub size_limit: AtomicU64,
    /// The most segments the dedup table may add (layout 14). Fixed at creation.
    pub dedup_growth: AtomicU64,
    /// The most segments the group table may add (layout 16). Fixed at creation.
    pub group_growth: AtomicU64,
    /// Wall-clock time of the last change of the queue's settings (`Queue::set_attributes`),
    /// ms since the Unix epoch, 0 if none since creation: SQS's `LastModifiedTimestamp`.
    /// Raised by a `fetch_max`, so that racing changes keep the latest. Appended in the
    /// header's spare page: an arena made before it reads 0.
    pub modified_wall_ms: AtomicU64,
}

/// The growth line (layout 13): written only when a size class grows, so no hot path touches
/// it; read by a participant that meets a slot index of a segment it has not mapped yet.
#[repr(C)]
#[derive(Debug, Default)]
pub struct GrowLine {
    /// Owner code of the participant adding a segment (0 = none): owner-tagged, taken over
    /// only from a proven-dead owner.
    pub claim: AtomicU64,
    /// Per segment kind (each size class, the dedup table, the group table), the segments it has added
    /// and published. SYNC POINT(segment-publish): stored with Release after the segment's
    /// directory entry and its reserved blocks, loaded with Acquire before a participant maps
    /// the segment.
    pub segments: [AtomicU64; MAX_KINDS],
    /// Segments added over the arena's life (all classes).
    pub grows: AtomicU64,
    /// Growths refused by the file system (no space left under the size limit).
    pub refused: AtomicU64,
}

/// One ReceiveRequestAttemptId record (R11), see `protocol::attempt`.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct AttemptEntry {
    /// `[inc:24][kind:2][owner:38]`: FREE, WRITING(owner) or DONE.
    pub state: AtomicU64,
    /// Keyed hash of the attempt id.
    pub hash: AtomicU64,
    /// Arena time (ms) of the receive.
    pub created: AtomicU64,
    /// `[count:8][id_len:8][vt_ms:48]`.
    pub meta: AtomicU64,
    /// Node refs `[inc:32][idx:32]` of the messages.
    pub refs: [AtomicU64; 10],
    /// Each message's `vis` word as the receive left it.
    pub vis: [AtomicU64; 10],
    /// The attempt id bytes, 8 per word, little-endian.
    pub id: [AtomicU64; MAX_ID_LEN / 8],
}

/// Bytes of an attempt record.
pub const ATTEMPT_ENTRY_SIZE: usize = 384;

/// Dedup evictions (with `dedup_overflow` 0): written only by a send that found its entries
/// full, so no hot path touches this line.
#[repr(C)]
#[derive(Debug, Default)]
pub struct EvictLine {
    /// Keys forgotten before their interval ended (lifetime count).
    pub count: AtomicU64,
    /// Arena time (ms) of the last eviction.
    pub last_ms: AtomicU64,
    /// How long (ms) the key evicted last had been remembered: the effective dedup window at
    /// that moment.
    pub last_age_ms: AtomicU64,
}

/// Quarantines: written only when corruption is found, so no hot path touches this line.
#[repr(C)]
#[derive(Debug, Default)]
pub struct QuarantineLine {
    /// Messages taken out of the queue because they could not be read or walked to (lifetime
    /// count).
    pub messages: AtomicU64,
    /// Groups whose list could not be walked and were rebuilt empty (lifetime count).
    pub groups: AtomicU64,
    /// Arena time (ms) of the last quarantine.
    pub last_ms: AtomicU64,
    /// The slot and incarnation `[idx:32][inc:32]` of the message quarantined last (with the
    /// arena nonce, its message id).
    pub last_ref: AtomicU64,
}

/// The in-flight census line.
#[repr(C)]
#[derive(Debug, Default)]
pub struct CensusLine {
    /// Arena time (ms) of the last census.
    pub last_ms: AtomicU64,
}

/// Longest dead-letter queue path in a redrive policy, bytes.
pub const MAX_REDRIVE_PATH: usize = 256;

/// The redrive policy: a version word naming the current buffer, a writer claim, two buffers.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct RedriveControl {
    /// `[version:63][buffer:1]`: bumped by each change. SYNC POINT(settings-publish).
    pub current: AtomicU64,
    /// Owner code of the participant writing the other buffer (0 = none).
    pub writer: AtomicU64,
    /// The two buffers.
    pub buffers: [RedrivePolicyWords; 2],
}

/// One redrive policy buffer.
#[repr(C)]
#[derive(Debug, Default)]
pub struct RedrivePolicyWords {
    /// `maxReceiveCount` (1–1000); 0 = no redrive policy.
    pub max_receive_count: AtomicU64,
    /// Length of the dead-letter queue's path, bytes.
    pub path_len: AtomicU64,
    /// The path bytes, 8 per word, little-endian.
    pub path: [AtomicU64; MAX_REDRIVE_PATH / 8],
}

/// The futex doorbell line.
#[repr(C)]
#[derive(Debug, Default)]
pub struct WakeLine {
    /// Bumped by whoever made progress (a published message, a freed slot) and saw
    /// `waiters > 0`; the waiters sleep on it.
    pub doorbell: AtomicU32,
    /// Number of waiters announced as (about to be) asleep.
    pub waiters: AtomicU32,
}

/// A participant registry record. `state` = `[gen:32][status:32]`.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Participant {
    /// `[gen:32][status:32]`, status `pstate::FREE` or `pstate::ALIVE` (see `protocol::words`).
    pub state: AtomicU64,
    /// Process id, for display only (never trusted as identity).
    pub pid: AtomicU64,
    /// This participant's sleepers: receivers counted in `Header::wake`'s `waiters` (low 32
    /// bits) and producers counted in `Header::space`'s (high 32 bits), so that whoever
    /// clears the record gives both counts back.
    pub waiting: AtomicU64,
    /// This slot's changes to the in-flight count besides its counters (wrapping): -1 per
    /// removal of a received message other than a delete, +1 per never-received message a
    /// receive marked in flight but could not hand out. The count's share of a first receive
    /// is in `counters[RECEIVED]` less `counters[VISIBILITY_EXPIRIES]` (layout 20), of a
    /// delete in `counters[DELETED]` (layout 19), which the in-flight sum adds and subtracts.
    /// Kept across registrations: only the sum counts.
    pub in_flight: AtomicU64,
    /// Lifetime counters of this slot's participants, indexed by [`counter`]. Only the
    /// participant registered in the slot adds to them (its own cache lines: no contention);
    /// they are kept across registrations, so their sums over every slot are the queue's
    /// lifetime totals. The first [`counter::STRIPED`] have stripes too (`stripes`): their
    /// totals are these plus every stripe's.
    pub counters: [AtomicU64; counter::COUNT],
    /// Per-thread stripes of the first [`counter::STRIPED`] counters (layout 21), two a line
    /// on the record's last two lines. A thread of the registered process that holds stripe
    /// `k` (`protocol::accounting`: a process-local claim, given back when the thread ends)
    /// is its only writer, so it adds with a plain load and store, not a locked
    /// read-modify-write; threads without one add to `counters` with `fetch_add`.
    pub stripes: [[AtomicU64; counter::STRIPED]; counter::STRIPES],
}

/// Indices of [`Participant::counters`]. The three the in-flight count sums (`RECEIVED`,
/// `VISIBILITY_EXPIRIES`, `DELETED`) lie on the record's first line with `in_flight`
/// (offsets 40–56; layout 20); with their stripes (layout 21, the record's last two lines) the
/// sum reads three lines a record.
pub mod counter {
    /// Messages enqueued by a send (duplicates excluded).
    pub const SENT: usize = 0;
    /// Messages received again after their visibility ended (timed out, changed to 0, or
    /// released at their holder's death).
    pub const VISIBILITY_EXPIRIES: usize = 1;
    /// Messages handed out by receives (replays of an attempt id excluded).
    pub const RECEIVED: usize = 2;
    /// Successful deletes.
    pub const DELETED: usize = 3;
    /// Sends dropped as duplicates (D1).
    pub const DUPLICATES: usize = 4;
    /// Messages moved to the dead-letter queue (X1).
    pub const MOVED_TO_DEAD_LETTER: usize = 5;
    /// Messages removed by retention (T1).
    pub const RETENTION_EXPIRIES: usize = 6;
    /// Receives cut short by the in-flight limit (R8).
    pub const IN_FLIGHT_LIMIT_HITS: usize = 7;
    /// Times a receiver went to sleep on the doorbell, or a producer on the space doorbell
    /// (`send_timeout` on a full size class).
    pub const WAITS: usize = 8;
    /// Times a producer rang the doorbell for a sleeping receiver.
    pub const WAKE_UPS: usize = 9;
    /// Retries caused by another participant: a group claimed by another receiver, a lost
    /// append CAS.
    pub const CONTENTION_RETRIES: usize = 10;
    /// Dead participants whose registrations this one repaired and freed (each is counted
    /// once, by the recoverer whose CAS freed it).
    pub const PARTICIPANTS_RECOVERED: usize = 11;
    /// Number of counters.
    pub const COUNT: usize = 12;
    /// The counters with per-thread stripes (`Participant::stripes`, layout 21): indices
    /// below this (sent, visibility expiries, received, deleted: one or more of them on every
    /// send, receive and delete).
    pub const STRIPED: usize = 4;
    /// Stripes per participant record.
    pub const STRIPES: usize = 4;
}

/// One entry of the group table.
///
/// `state` word (`[ginc:24][kind:2][owner:38]`):
///
/// | kind        | owner       | meaning                                                   |
/// |-------------|-------------|-----------------------------------------------------------|
/// | `FREE`      | 0           | never used; ends every probe chain                        |
/// | `INSERTING` | inserter    | being initialised by `owner` (who holds the home claim)   |
/// | `ACTIVE`    | 0           | group `id` lives here, incarnation `ginc`; *idle* when    |
/// |             |             | `head` is its sentinel and the sentinel's link `NIL`      |
/// |             |             | (layout 19: emptied, kept for its next send)              |
/// | `TOMBSTONE` | 0           | was a group; reusable, does not end probe chains          |
/// | `TOMBSTONE` | quarantiner | being quarantined by `owner`                              |
///
/// The `claim` word grants its owner exclusive right to take messages of the group and to
/// advance `head` (free consumed nodes). Bit 63 (`DIRTY`) asks the owner to clean up again;
/// bit 62 (`HINT`, layout 24) says a ready hint for the group is queued, whoever holds it.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct GroupEntry {
    /// Kind, incarnation and inserter, see the table above.
    pub state: AtomicU64,
    /// The sentinel's position (layout 19): 0 for a new incarnation, one past the last
    /// message's when the list was reopened, so that positions (and sequence numbers) keep
    /// growing in the group. Written by the claim holder before the sentinel's link word and
    /// `tail` (Release stores), read by appenders after their Acquire load of `tail`. On the
    /// line of `head`, `tail` and the sentinel's word, which a reopen writes and the next
    /// append reads anyway (in place of `home_claim`, moved to the key's line).
    pub sentinel_pos: AtomicU64,
    /// Receive/cleanup claim (owner code, plus `DIRTY`), and `HINT` (layout 24): set while a
    /// ready hint for this group is (believed) queued.
    pub claim: AtomicU64,
    /// Unused since layout 24 (it held the hint flag, now the claim word's `HINT` bit); 0.
    pub unused: AtomicU64,
    /// Node ref of the dummy (last consumed node, or the sentinel).
    pub head: AtomicU64,
    /// Node ref of the last node (a hint helped forward, never behind `head`).
    pub tail: AtomicU64,
    /// The sentinel node's link word. Its incarnation is the sentinel's: a new one each time
    /// the list is reopened (layout 19, see `protocol::release`) or the entry inserted.
    pub sentinel: AtomicU64,
    /// High 64 bits of this incarnation's sequence numbers.
    pub seq_base: AtomicU64,
    /// As a home slot: every live entry whose home is this slot lies within this many slots
    /// after it (its probe length). Grown by an inserter holding this slot's home claim before
    /// it initialises the entry, shrunk to the live maximum by the next such inserter: lookups
    /// of keys with this home scan only that far, whatever tombstones lie beyond. (Layout 17:
    /// on the key's line, which a lookup reads anyway, and written only when it changes.)
    pub probe: AtomicU64,
    /// Keyed hash of the id.
    pub hash: AtomicU64,
    /// Length of the id in bytes.
    pub id_len: AtomicU64,
    /// Insert claim for keys whose home slot this is (owner code or 0). Layout 19: on the
    /// key's line, off the first line (a group's producer's and consumer's words); an insert
    /// that lands on its home entry writes the key on this line anyway.
    pub home_claim: AtomicU64,
    /// The id bytes, 8 per word, little-endian.
    pub id: [AtomicU64; MAX_ID_LEN / 8],
    /// Node ref of an old dummy being freed by the claim holder (0 = none). Layout 17: on the
    /// entry's last line, which a lookup of an id of up to 96 bytes never reads (104 before
    /// layout 19), so that the consumer's writes of it do not take the key's line from the
    /// producers that look it up.
    pub pending_free: AtomicU64,
}

/// One entry of the dedup table. Its key (dedup id, then the group id with messageGroup
/// scope) lives in the parallel key array, 8 bytes per word, little-endian.
///
/// `state` word (`[inc:24][kind:2][owner:38]`), see `protocol::dedup`:
///
/// | kind      | owner  | meaning                                                              |
/// |-----------|--------|----------------------------------------------------------------------|
/// | `FREE`    | 0      | reusable (never used, aborted, or cleared by purge)                   |
/// | `WRITING` | sender | reserved by `owner` (who holds the home claim); key being written     |
/// | `PENDING` | sender | key written; `owner`'s message `msg` is being sent                    |
/// | `DONE`    | 0      | message `msg` accepted with sequence `(seq_hi, pos)`, until `expires` |
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct DedupEntry {
    /// Kind, incarnation and owner, see the table above.
    pub state: AtomicU64,
    /// Insert claim for keys whose home entry this is (owner code or 0).
    pub home_claim: AtomicU64,
    /// One more than the largest probe distance of any key whose home entry this is (0: none).
    /// Only grows (lookups scan `probe` entries from the home).
    pub probe: AtomicU64,
    /// Keyed hash of the key.
    pub hash: AtomicU64,
    /// Node ref `[inc:32][idx:32]` of the message (idx `u32::MAX`: none yet).
    pub msg: AtomicU64,
    /// High 64 bits of the message's sequence number.
    pub seq_hi: AtomicU64,
    /// Low 64 bits of the message's sequence number.
    pub pos: AtomicU64,
    /// `[dedup_len:8][group_len:8][expires:48]`: key lengths and the arena time (ms) at which
    /// a `DONE` entry stops deduplicating.
    pub meta: AtomicU64,
}

/// The four words a message owns (layout 22): a slot header's first four
/// ([`MsgHeader::own`]), or a pack member's entry in its pack's directory, at the start of the
/// slot's payload (member `j`'s at byte `32 × j`; the members' bytes follow the directory, each
/// member's body at a 64-byte boundary, then its dedup id and its framed attributes,
/// `protocol::pack::place`). A pack's slot header holds what its members share (the link,
/// the first member's position, the group and epoch0, the enqueue time) and, in its own
/// words, the unit's state (`vis`) and the pack's size (`lens`).
#[repr(C, align(32))]
#[derive(Debug, Default)]
pub struct MsgWords {
    /// Visibility / allocation state with its epoch: `[epoch:24][field:40]`, see
    /// `protocol::vis`.
    pub vis: AtomicU64,
    /// `[flags:8][body_len:24][attr_len:24][dedup_len:8]`; flag `MOVED` (1): the message id
    /// is the dedup id (a dead-lettered message, D8). Flag `PACKED` (2, layout 22), on a slot
    /// header's only: the slot holds a pack, and the word is `[flags:8][members:8][_:16]
    /// [used:32]` (its member count and the bytes its directory and members occupy,
    /// `protocol::pack`). A member has no flag (a pack holds only messages sent here, never a
    /// moved one).
    pub lens: AtomicU64,
    /// `[holder:16][gen:8][ms:40]` (`protocol::words::recv`): who received the message last
    /// (participant index + 1 and the low 8 bits of its generation, so a dead holder's messages
    /// can be released at once) and the arena time (ms) of that receive, for the 12-hour
    /// visibility cap (H6). In a slot header, while the slot is claimed by its producer:
    /// index + 1 of the producer's dedup entry (0 = none).
    pub recv_ms: AtomicU64,
    /// Wall-clock time of the first receive (0 = never received).
    pub first_recv_ms: AtomicU64,
}

/// The header of one message slot (payload lives in a parallel array). `link` =
/// `[inc:32][next:32]`.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct MsgHeader {
    /// The words the slot's message owns (a pack's: the unit's state and size).
    pub own: MsgWords,
    /// Incarnation of this slot and index of the next node of its group.
    pub link: AtomicU64,
    /// Position in the group incarnation (low 64 bits of the sequence number); a pack's
    /// first member's.
    pub pos: AtomicU64,
    /// `[source_len:8][epoch0:24][group:32]`: length of the dead-letter source path at the
    /// start of the payload (0: none), the epoch minus receives before this queue (M4), and
    /// the group table index.
    pub group_epoch0: AtomicU64,
    /// Arena time (ms) of the enqueue: delay and retention count from it (L1, T1, T3).
    pub sent: AtomicU64,
}

#[cfg(not(shmfifo_loom))]
const _: () = {
    assert!(core::mem::size_of::<MsgHeader>() == MSG_HEADER_SIZE);
    assert!(core::mem::size_of::<MsgWords>() == PACK_MEMBER_SIZE);
    // Pinned: tests/quarantine.rs writes `lens` and finds a header by `vis`, `pos` and
    // `group_epoch0` through the file.
    assert!(core::mem::offset_of!(MsgHeader, own) + core::mem::offset_of!(MsgWords, lens) == 8);
    assert!(core::mem::offset_of!(MsgHeader, pos) == 40);
    assert!(core::mem::offset_of!(MsgHeader, group_epoch0) == 48);
    assert!(core::mem::size_of::<GroupEntry>() == GROUP_ENTRY_SIZE);
    // Pinned: the tests that damage a group through the file (tests/common) write at them.
    assert!(core::mem::offset_of!(GroupEntry, head) == 32);
    assert!(core::mem::offset_of!(GroupEntry, id) == 96);
    assert!(core::mem::size_of::<Participant>() == PARTICIPANT_SIZE);
    // The in-flight sum's words on a record's first line (see `counter`).
    assert!(core::mem::offset_of!(Participant, in_flight) < 64);
    assert!(
        core::mem::offset_of!(Participant, counters) + 8 * counter::VISIBILITY_EXPIRIES < 64
            && core::mem::offset_of!(Participant, counters) + 8 * counter::RECEIVED < 64
            && core::mem::offset_of!(Participant, counters) + 8 * counter::DELETED < 64
    );
    // The stripes on the record's last two lines, two a line (see `Participant::stripes`).
    assert!(core::mem::offset_of!(Participant, stripes) == 128);
    assert!(2 * 8 * counter::STRIPED == 64 && counter::STRIPED <= counter::COUNT);
    assert!(core::mem::size_of::<DedupEntry>() == DEDUP_ENTRY_SIZE);
    assert!(core::mem::size_of::<AttemptEntry>() == ATTEMPT_ENTRY_SIZE);
    assert!(core::mem::size_of::<Header>() <= PAGE as usize);
    assert!(core::mem::offset_of!(Header, magic) == 0);
    assert!(core::mem::offset_of!(Header, layout_version) == 8);
    assert!(core::mem::offset_of!(Header, total_size) == 16);
    assert!(core::mem::offset_of!(Header, state) == 0x158);
    assert!(core::mem::offset_of!(Header, wake) == 0x180);
};

mod geometry;
pub use geometry::*;
