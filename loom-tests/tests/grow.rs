//! Growing a size class (`protocol::grow`, layout 13): SYNC POINT(segment-publish) and the
//! grow claim, with growers racing, a grower that dies at each step, and one that stops
//! forever holding the claim.
#![cfg(shmfifo_loom)]

use shmfifo::layout::{segment_bytes, MAX_SEGMENTS};
use shmfifo_loom_tests::*;

/// The published segments' file ranges: never overlapping, all past the base file.
fn assert_disjoint(a: &Arena<'_>) {
    let n = a.classes[0].unwrap().n();
    let mut ranges: Vec<(u64, u64)> = (1..=a.published(0))
        .map(|k| {
            let off = a.directory[k as usize - 1].load(Ordering::SeqCst);
            (off, off + segment_bytes(n, 16, k))
        })
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "segments overlap: {ranges:?}");
    }
    assert!(ranges.iter().all(|r| r.0 >= a.base_len), "{ranges:?}");
    const { assert!(MAX_SEGMENTS >= 2) };
}

/// Two producers fill a class of one slot that may add two segments (1 + 1 + 2 slots): each
/// of their four sends is accepted, the class has grown exactly as far as it needed, the
/// segments do not overlap, and every message is received in each producer's order (the
/// consumer maps the segments it meets: only published ones).
#[test]
fn two_growers_race_and_nothing_overlaps() {
    model(|| {
        let h = arena_growing(3, 2, 1, 2);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = par(
            move || {
                let a = h1.arena();
                (send(&a, &e1, 1, "g", b"a1"), send(&a, &e1, 1, "g", b"a2"))
            },
            move || {
                let a = h2.arena();
                (send(&a, &e2, 2, "h", b"b1"), send(&a, &e2, 2, "h", b"b2"))
            },
        );
        for r in [r1.0, r1.1, r2.0, r2.1] {
            r.expect("room grows: every send is accepted");
        }
        let a = h.arena();
        assert_eq!(a.published(0), 2, "4 messages need 1 + 1 + 2 slots");
        assert_disjoint(&a);
        assert_eq!(a.hdr.grow.0.claim.load(Ordering::SeqCst), 0);
        let got = drain(&a, &env, 0);
        let pos = |b: &[u8]| got.iter().position(|x| x == b).expect("received");
        assert!(
            pos(b"a1") < pos(b"a2") && pos(b"b1") < pos(b"b2"),
            "{got:?}"
        );
        assert_eq!(got.len(), 4);
    });
}

/// A class laid out empty (layout 15: no slot in the base file, segments of 1, then 2 slots):
/// two producers race to take its first slots; each send is accepted, the class grew exactly
/// as far as two messages need (1 + 2 slots), nothing overlaps, and both are received.
#[test]
fn an_empty_class_takes_its_first_segments_on_demand() {
    model(|| {
        let h = arena_growing(3, 2, 0, 2);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"a"),
            move || send(&h2.arena(), &e2, 2, "h", b"b"),
        );
        r1.expect("room grows");
        r2.expect("room grows");
        let a = h.arena();
        assert_eq!(a.published(0), 2, "2 messages need 1 + 2 slots");
        assert_eq!(a.slots_now(0), 3);
        assert_disjoint(&a);
        let mut got = drain(&a, &env, 0);
        got.sort();
        assert_eq!(got, [b"a".to_vec(), b"b".to_vec()]);
    });
}

/// A receiver meets the messages of a segment while it is being published: whatever it
/// receives it reads through a published segment (never `Corrupted`), and the rest follows.
#[test]
fn a_receiver_maps_only_published_segments() {
    model(|| {
        let h = arena_growing(3, 1, 1, 1);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 1, "g", b"m1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (sent, got) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"m2"),
            move || {
                let a = h2.arena();
                let first = recv(&a, &e2, 2, 10, 1_000).expect("never corrupted");
                for (hd, _) in &first {
                    handle::delete(&a, &*e2, me(2), *hd).expect("delete");
                }
                let second = recv(&a, &e2, 2, 10, 1_000).expect("never corrupted");
                (first, second)
            },
        );
        sent.expect("the class grows for the second message");
        let a = h.arena();
        let mut bodies: Vec<Vec<u8>> = got.0.into_iter().chain(got.1).map(|(_, b)| b).collect();
        bodies.extend(drain(&a, &env, 0));
        assert_eq!(bodies, [b"m1".to_vec(), b"m2".to_vec()]);
    });
}

/// Participant 1 fills a class of one slot that may add one segment and dies at its `k`-th
/// step of the send that grows it (holding the grow claim, with the offset written or the
/// blocks reserved, or the segment published). Participant 2 then sends: the growth is
/// finished or redone (one segment, never two at once), and after recovery every accepted
/// message is received, in order.
#[test]
fn a_grower_that_dies_at_each_step_leaves_the_growth_to_the_next() {
    for k in 0..12 {
        model(move || {
            let h = arena_growing(3, 1, 1, 2);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 1, "g", b"a").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (dead, other) = par(
                move || as_participant(&e1, 1, Some(k), || send(&h1.arena(), &e1, 1, "g", b"b")),
                move || send(&h2.arena(), &e2, 2, "g", b"c"),
            );
            let a = h.arena();
            // A survivor that met the dead grower's claim before it was proven dead waited and
            // said Busy (retryable); otherwise it was served.
            let other = match other {
                Err(Fault::Busy(_)) => send(&a, &env, 2, "g", b"c"),
                r => r,
            };
            other.expect("the survivor's send is accepted");
            assert!(a.published(0) <= 2);
            assert_disjoint(&a);
            recovery::recover(&a, &*env, me(0)).expect("recovery");
            let got = drain(&a, &env, 0);
            assert!(got.contains(&b"c".to_vec()), "{got:?}");
            if dead.is_ok() {
                assert!(got.contains(&b"b".to_vec()), "{got:?}");
            }
            assert_eq!(got[0], b"a".to_vec());
        });
    }
}

/// A grower stopped forever (alive) holding the grow claim: a producer that needs room waits
/// its bounded time and says `Busy` (retryable), never `Corrupted`; a producer of another
/// group with room, and a receiver, are served.
#[test]
fn a_grower_stopped_forever_holds_only_the_growth() {
    for k in 0..4 {
        model(move || {
            let h = arena_growing(3, 2, 2, 1);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 1, "g", b"a").unwrap();
            send(&a, &env, 1, "g", b"b").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, (needs_room, got)) = par(
                move || {
                    crash::arm(k);
                    // Stopped (not dead): the claim it holds stays held.
                    let _ = send(&h1.arena(), &e1, 1, "g", b"c");
                },
                move || {
                    let a = h2.arena();
                    let r = send(&a, &e2, 2, "h", b"d");
                    let got = recv(&a, &e2, 2, 10, 1_000).expect("receive is served");
                    (r, got)
                },
            );
            assert!(
                matches!(needs_room, Ok(_) | Err(Fault::Busy(_))),
                "{needs_room:?}"
            );
            assert!(!got.is_empty(), "the receiver is served");
        });
    }
}

/// Layout 14, D1: two senders with new dedup ids meet a full dedup table of one entry (every
/// window full at once) that may add two segments (1 + 1 + 2 entries): it grows twice, both
/// ids are accepted and all three are remembered (each a duplicate when sent again), none
/// evicted.
#[test]
fn two_senders_grow_the_dedup_table_and_both_ids_are_kept() {
    model(|| {
        let h = arena_dedup_growing(3, 2, 4, 1, 2);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send_dedup(&a, &env, 0, "g", b"a", "ka", 1).unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = par(
            move || send_dedup(&h1.arena(), &e1, 1, "g", b"b", "kb", 3),
            move || send_dedup(&h2.arena(), &e2, 2, "h", b"c", "kc", 5),
        );
        let r1 = r1.expect("accepted");
        let r2 = r2.expect("accepted");
        assert!(!r1.duplicate && !r2.duplicate);
        let a = h.arena();
        // One entry, then one and two more: the third id needed the second segment.
        assert_eq!(a.dedup_entries(), 4);
        assert_eq!(a.hdr.dedup_evict.0.count.load(Ordering::SeqCst), 0);
        for (g, k, home) in [("g", "ka", 1), ("g", "kb", 3), ("h", "kc", 5)] {
            let again = send_dedup(&a, &env, 0, g, b"x", k, home).unwrap();
            assert!(again.duplicate, "{k} remembered");
        }
    });
}

/// A sender whose new dedup id grows the dedup table dies at each step of it (holding the
/// key's home claim and the grow claim): the survivor's send of the same id is accepted once
/// (a duplicate of the dead one's where that was linked), the table is usable, and the
/// first id is still remembered.
#[test]
fn a_dedup_grower_that_dies_at_each_step_leaves_the_table_usable() {
    for k in 0..10 {
        model(move || {
            let h = arena_dedup_growing(3, 2, 4, 1, 1);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send_dedup(&a, &env, 0, "g", b"a", "ka", 1).unwrap();
            let (h1, e1) = (h.clone(), env.clone());
            let (dead, ()) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        send_dedup(&h1.arena(), &e1, 1, "g", b"b", "kb", 3)
                    })
                },
                || (),
            );
            let a = h.arena();
            recovery::recover(&a, &*env, me(2)).expect("recovery");
            let again = send_dedup(&a, &env, 2, "g", b"b", "kb", 3).expect("accepted");
            if let Ok(first) = dead {
                assert!(again.duplicate, "k={k}: acknowledged, so a duplicate");
                assert_eq!((again.idx, again.inc), (first.idx, first.inc));
            }
            let first = send_dedup(&a, &env, 2, "g", b"x", "ka", 1).unwrap();
            assert!(first.duplicate, "k={k}: the first id is remembered");
            let got = drain(&a, &env, 0);
            assert_eq!(got, [b"a".to_vec(), b"b".to_vec()], "k={k}");
        });
    }
}

/// The active group entries holding `id`, in every published table (layout 16).
fn entries_of(a: &Arena<'_>, id: &[u8]) -> usize {
    a.all_groups()
        .filter(|(_, e)| {
            let mut out = [0u8; shmfifo::layout::MAX_ID_LEN];
            let n = shmfifo::protocol::group::read_id(e, &mut out);
            gstate::kind(e.state.load(Ordering::SeqCst)) == gstate::ACTIVE && &out[..n] == id
        })
        .count()
}

/// Layout 16: two senders of new groups meet a full group table (one group in a base table of
/// two entries) that may add two tables (2 and 4 entries): it grows twice, both groups are
/// inserted once each, a later send finds each where it was put, and every message comes back
/// in its group's order.
#[test]
fn two_senders_grow_the_group_table_and_each_group_is_inserted_once() {
    model(|| {
        let h = arena_groups_growing(3, 1, 6, 2);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "a", b"a1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = par(
            move || send(&h1.arena(), &e1, 1, "b", b"b1"),
            move || send(&h2.arena(), &e2, 2, "c", b"c1"),
        );
        r1.expect("accepted");
        r2.expect("accepted");
        let a = h.arena();
        assert_eq!(a.published(shmfifo::layout::GROUP_KIND), 2);
        send(&a, &env, 0, "b", b"b2").unwrap();
        send(&a, &env, 0, "c", b"c2").unwrap();
        for id in [&b"a"[..], b"b", b"c"] {
            assert_eq!(entries_of(&a, id), 1, "{id:?} inserted once");
        }
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), 3);
        let got = drain(&a, &env, 0);
        assert_eq!(got.len(), 5);
        for (x, y) in [(&b"b1"[..], &b"b2"[..]), (b"c1", b"c2")] {
            let (i, j) = (
                got.iter().position(|m| m == x).unwrap(),
                got.iter().position(|m| m == y).unwrap(),
            );
            assert!(i < j, "{got:?}");
        }
        assert_clean(&a);
    });
}

/// Layout 16: two senders of the same new group race while the table must grow to take it:
/// one entry for it (the base table's home claim serialises them across tables), both
/// messages in it.
#[test]
fn two_senders_of_one_new_group_insert_it_once_across_tables() {
    model(|| {
        let h = arena_groups_growing(3, 1, 6, 1);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "a", b"a1").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = par(
            move || send(&h1.arena(), &e1, 1, "b", b"x"),
            move || send(&h2.arena(), &e2, 2, "b", b"y"),
        );
        r1.expect("accepted");
        r2.expect("accepted");
        let a = h.arena();
        assert_eq!(entries_of(&a, b"b"), 1);
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), 2);
        let mut got = drain(&a, &env, 0);
        got.sort();
        assert_eq!(got, [b"a1".to_vec(), b"x".to_vec(), b"y".to_vec()]);
        assert_clean(&a);
    });
}

/// Layout 16: a sender whose new group grows the group table dies at each step (holding the
/// key's home claim, then the grow claim): the survivor's send to the same group is accepted,
/// into the one entry of that group, and the table stays usable.
#[test]
fn a_group_grower_that_dies_at_each_step_leaves_the_table_usable() {
    for k in 0..12 {
        model(move || {
            let h = arena_groups_growing(3, 1, 6, 1);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 0, "a", b"a1").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (dead, other) = par(
                move || as_participant(&e1, 1, Some(k), || send(&h1.arena(), &e1, 1, "b", b"x")),
                move || send(&h2.arena(), &e2, 2, "b", b"y"),
            );
            let a = h.arena();
            // A survivor that met the dead sender's claim before it was proven dead waited and
            // said Busy (retryable); otherwise it was served.
            let other = match other {
                Err(Fault::Busy(_)) => send(&a, &env, 2, "b", b"y"),
                r => r,
            };
            other.expect("the survivor's send is accepted");
            recovery::recover(&a, &*env, me(2)).expect("recovery");
            assert_eq!(entries_of(&a, b"b"), 1, "k={k}");
            let got = drain(&a, &env, 2);
            assert!(got.contains(&b"y".to_vec()), "k={k}: {got:?}");
            if dead.is_ok() {
                assert!(got.contains(&b"x".to_vec()), "k={k}: {got:?}");
            }
            assert_eq!(got[0], b"a1".to_vec());
        });
    }
}

/// Layout 16: a sender stopped forever (alive) while its new group grows the group table: a
/// sender of an existing group and a receiver are served; a sender of another new group is
/// served or says `Busy` (retryable, the claims the stopped one holds), never `Corrupted`.
#[test]
fn a_group_grower_stopped_forever_holds_only_its_claims() {
    for k in 0..8 {
        model(move || {
            let h = arena_groups_growing(3, 1, 6, 1);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            send(&a, &env, 0, "a", b"a1").unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, (old, new, got)) = par(
                move || {
                    crash::arm(k);
                    // Stopped (not dead): the claims it holds stay held.
                    let _ = send(&h1.arena(), &e1, 1, "b", b"x");
                },
                move || {
                    let a = h2.arena();
                    let old = send(&a, &e2, 2, "a", b"a2");
                    let new = send(&a, &e2, 2, "c", b"c1");
                    let got = recv(&a, &e2, 2, 10, 1_000).expect("receive is served");
                    (old, new, got)
                },
            );
            old.expect("an existing group is served");
            assert!(matches!(new, Ok(_) | Err(Fault::Busy(_))), "{new:?}");
            assert!(!got.is_empty(), "the receiver is served");
        });
    }
}

/// Layout 16: more groups ready than the base ring holds (two entries, one per base entry;
/// three groups once the table grew): the groups of an added table are hinted on that table's
/// own ring while a receiver pops: receives alone (no sweep) deliver every group's message,
/// each once.
#[test]
fn groups_of_an_added_table_are_hinted_on_its_own_ring() {
    model(|| {
        let h = arena_groups_growing(3, 1, 6, 2);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "a", b"a").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (sent, got) = par(
            move || {
                let a = h1.arena();
                send(&a, &e1, 1, "b", b"b").unwrap();
                send(&a, &e1, 1, "c", b"c").unwrap();
            },
            move || {
                let a = h2.arena();
                let got = recv(&a, &e2, 2, 10, 1_000).expect("receive");
                for (hd, _) in &got {
                    handle::delete(&a, &*e2, me(2), *hd).expect("delete");
                }
                got.into_iter().map(|(_, b)| b).collect::<Vec<_>>()
            },
        );
        let () = sent;
        let a = h.arena();
        let mut all = got;
        for _ in 0..4 {
            for (hd, b) in recv(&a, &env, 0, 10, 1_000).expect("receive") {
                handle::delete(&a, &*env, me(0), hd).expect("delete");
                all.push(b);
            }
        }
        all.sort();
        assert_eq!(all, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_clean(&a);
    });
}
