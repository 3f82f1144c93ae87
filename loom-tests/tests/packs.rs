//! Models of packs (layout 22, stage 1b): a batch's messages to one group sent as one slot
//! (`send::send_chain_as` with `Packing::Where`), received, deleted, released and freed member
//! by member, with a participant that dies or stops at each of its steps. Packs' directories
//! live in the heap arena's side table (`arena_packs`, `HeapArena::with_packs`).
#![cfg(shmfifo_loom)]

use shmfifo_loom_tests::*;

/// Participant 1 sends "a", "b" to group "g" as one pack (dedup ids "ka", "kb") and dies at its
/// `k`-th step; participant 2 meanwhile sends "c" to "g". After recovery and a drain: "a" and
/// "b" were both delivered or neither (delivered if 1's call returned them as sent: the pack is
/// committed at its link CAS, invariant C), adjacent and in order, "c" before or after both;
/// nothing twice; a repeat of "ka" is a duplicate exactly when "a" was delivered (invariant D:
/// a dead producer's entries are committed or aborted with its pack); every slot free.
#[test]
fn a_pack_is_committed_whole_with_its_dedup_entries() {
    at_each_step(40, 8, |k| {
        model(move || {
            let h = arena_packs(3, 2, 3, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (pack, single) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let r =
                            send_pack(&h1.arena(), &e1, 1, "g", &[b"a", b"b"], Some(&["ka", "kb"]));
                        if crash::crashed() {
                            stopped();
                        }
                        r
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"c"),
            );
            single.expect("the single send is served");
            let a = h.arena();
            recovery::recover(&a, &*env, me(0)).unwrap();
            let mut got = drain(&a, &env, 0);
            let pos = |got: &[Vec<u8>], b: &[u8]| got.iter().position(|x| x == b);
            assert!(pos(&got, b"c").is_some(), "c delivered: {got:?}");
            let delivered = match (pos(&got, b"a"), pos(&got, b"b")) {
                (Some(x), Some(y)) => {
                    assert_eq!(y, x + 1, "a then b, nothing between: {got:?}");
                    true
                }
                (None, None) => {
                    if let Ok(rs) = &pack {
                        assert!(
                            rs.iter().all(|r| r.is_err()),
                            "a pack reported sent was lost: {got:?}"
                        );
                    }
                    false
                }
                _ => panic!("half a pack: {got:?}"),
            };
            if let Ok(rs) = &pack {
                if let (Ok(x), Ok(y)) = (&rs[0], &rs[1]) {
                    assert_eq!((x.idx, x.inc, x.member), (y.idx, y.inc, 0), "one slot");
                    assert_eq!(y.member, 1);
                    assert_eq!(y.pos, x.pos + 1);
                }
            }
            let mut seen = got.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), got.len(), "nothing twice: {got:?}");
            let again = send_dedup(&a, &env, 0, "g", b"a2", "ka", 0).expect("a repeat of ka");
            assert_eq!(again.duplicate, delivered, "ka deduplicated iff a was sent");
            if !again.duplicate {
                got.extend(drain(&a, &env, 0));
            }
            assert_clean(&a);
        });
    });
}

/// Two holders delete the members of one pack at once ("a" and "c" by participant 1, "b" by
/// participant 2, which then sends "d" to the same group and receives): the pack is freed
/// exactly once, by whichever cleanup finds every member deleted, never while a member lives;
/// "d" is delivered once, after the pack; nothing deleted comes back; every slot free.
#[test]
fn members_deleted_by_two_holders_free_their_pack_once() {
    model(|| {
        let h = arena_packs(3, 2, 2, 0);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        let sent = send_pack(&a, &env, 0, "g", &[b"a", b"b", b"c"], None).unwrap();
        let idx = sent[0].as_ref().unwrap().idx;
        assert!(
            sent.iter().all(|r| r.as_ref().is_ok_and(|s| s.idx == idx)),
            "one pack"
        );
        let held = recv(&a, &env, 0, 10, 1_000).unwrap();
        assert_eq!(held.len(), 3);
        let (ac, b) = ([held[0].0, held[2].0], held[1].0);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (one, got2) = par(
            move || {
                let mut r = vec![Ok(()); 2];
                handle::delete_many(&h1.arena(), &*e1, me(1), &ac, &mut r).unwrap();
                r
            },
            move || {
                let a = h2.arena();
                handle::delete(&a, &*e2, me(2), b).expect("b deleted");
                send(&a, &e2, 2, "g", b"d").expect("d sent");
                recv(&a, &e2, 2, 10, 1_000).expect("a receive beside a delete")
            },
        );
        assert!(one.iter().all(|r| r.is_ok()), "a and c deleted: {one:?}");
        for (hd, body) in &got2 {
            assert_eq!(body.as_slice(), b"d", "only d: {got2:?}");
            handle::delete(&a, &*env, me(0), *hd).unwrap();
        }
        env.advance(1_001);
        let rest = drain(&a, &env, 0);
        let d = got2.len() + rest.iter().filter(|b| b.as_slice() == b"d").count();
        assert_eq!(d, 1, "d once: {got2:?} {rest:?}");
        assert!(rest.iter().all(|b| b.as_slice() == b"d"), "{rest:?}");
        assert_clean(&a);
    });
}

/// R8 (layout 25): a pack's second member deleted while a receive of the group holds its claim
/// a moment (the group is locked: it takes nothing). The delete that finds the claim held
/// leaves the member uncounted, in a pack whose first member is live, where no cleanup moves
/// past it; the holder it pokes (or the delete itself, if the claim came free) counts it at
/// once: the in-flight count is the first member alone.
#[test]
fn an_uncounted_member_of_a_live_pack_is_counted_at_once() {
    model(|| {
        let h = arena_packs(3, 2, 2, 0);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send_pack(&a, &env, 0, "g", &[b"a", b"b"], None).unwrap();
        let held = recv(&a, &env, 0, 10, 1_000).unwrap();
        assert_eq!(held.len(), 2);
        let b = held[1].0;
        delete_beside_a_locked_receive(&h, &env, b);
        assert_eq!(accounting::in_flight(&a), 1, "the first member alone");
    });
}

/// Invariant P: a stale receipt handle of a freed pack never deletes or changes a message of
/// the pack that reuses its slot. The old pack's members were received three times (their
/// handles' epoch is epoch0 + 3) at the same instant and timeout the new pack's first receive
/// uses, so that without the free's epoch past every member's the new members' words would
/// equal the old handle's expected word exactly. Participant 1 deletes with the stale handle
/// while participant 2 sends a new pack into the only slot and receives it: the stale delete is
/// `Expired`, the new members stay in flight under 2's handles, and come back after their
/// timeout.
#[test]
fn a_stale_handle_never_touches_a_reused_slots_pack() {
    model(|| {
        let h = arena_packs(3, 2, 1, 0);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        let first = send_pack(&a, &env, 0, "g", &[b"a", b"b"], None).unwrap();
        assert!(first.iter().all(|r| r.is_ok()));
        for _ in 0..2 {
            assert_eq!(recv(&a, &env, 0, 10, 0).unwrap().len(), 2);
        }
        let held = recv(&a, &env, 0, 10, 1_000).unwrap();
        assert_eq!(held.len(), 2);
        let stale = held[1].0;
        assert_eq!(stale.member, 1);
        for (hd, _) in &held {
            handle::delete(&a, &*env, me(0), *hd).unwrap();
        }
        assert_clean(&a);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (stale_delete, fresh) = par(
            move || handle::delete(&h1.arena(), &*e1, me(1), stale),
            move || {
                let a = h2.arena();
                send_pack(&a, &e2, 2, "g", &[b"c", b"d"], None).expect("sent");
                recv(&a, &e2, 2, 10, 1_000).expect("received")
            },
        );
        assert_eq!(
            stale_delete,
            Err(Fault::Expired),
            "a stale handle deleted something"
        );
        for (hd, _) in &fresh {
            assert!(
                handle::still_taken(&a, *hd).unwrap(),
                "a new member was changed by a stale handle"
            );
        }
        env.advance(1_001);
        let mut got: Vec<Vec<u8>> = drain(&a, &env, 0);
        got.sort();
        assert_eq!(got, [b"c".to_vec(), b"d".to_vec()]);
        assert_clean(&a);
    });
}

/// A receiver that dies at each step of a receive inside a pack ("a", "b", "c" of group "g",
/// one slot) loses nothing: after recovery releases what it held and the timeout passes, every
/// member is delivered, in order, by a drain (a member it took before dying comes back, R3
/// holding the group meanwhile), and every slot is free.
#[test]
fn a_receiver_dying_inside_a_pack_loses_nothing() {
    at_each_step(40, 4, |k| {
        model(move || {
            let h = arena_packs(3, 2, 2, 0);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a = h.arena();
            let sent = send_pack(&a, &env, 0, "g", &[b"a", b"b", b"c"], None).unwrap();
            assert!(sent.iter().all(|r| r.is_ok()));
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, got2) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let _ = recv(&h1.arena(), &e1, 1, 2, 1_000);
                        if crash::crashed() {
                            stopped();
                        }
                    })
                },
                move || {
                    let got = recv(&h2.arena(), &e2, 2, 10, 1_000);
                    assert!(
                        !matches!(got, Err(Fault::Corrupted(_))),
                        "a receive beside a dying one: {got:?}"
                    );
                    got.unwrap_or_default()
                },
            );
            env.kill(1);
            recovery::recover(&a, &*env, me(0)).unwrap();
            env.advance(1_001);
            let mut got: Vec<Vec<u8>> = drain(&a, &env, 0);
            let mut all: Vec<Vec<u8>> = got2.iter().map(|(_, b)| b.clone()).collect();
            all.append(&mut got);
            for want in [&b"a"[..], b"b", b"c"] {
                assert!(all.iter().any(|b| b == want), "{want:?} lost: {all:?}");
            }
            assert_clean(&a);
        });
    });
}

/// Recovery releases a dead holder's members one by one while a second participant deletes one
/// of them with the dead holder's handle: "b" is deleted exactly when the delete succeeded
/// (before the release kept its epoch with a deadline of now, the handle is still live; after
/// it, expired), "a" comes back, and the pack is freed once both are gone.
#[test]
fn a_release_of_a_packs_members_races_a_members_delete() {
    model(|| {
        let h = arena_packs(3, 2, 2, 0);
        // The API's default: a dead receiver's messages come back at once.
        h.arena().hdr.release_on_death.store(1, Ordering::SeqCst);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        assert!(send_pack(&a, &env, 0, "g", &[b"a", b"b"], None)
            .unwrap()
            .iter()
            .all(|r| r.is_ok()));
        let held = recv(&a, &env, 1, 10, 1_000).unwrap();
        assert_eq!(held.len(), 2);
        let b = held[1].0;
        env.kill(1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (released, deleted) = par(
            move || recovery::recover(&h1.arena(), &*e1, me(0)).map(|_| ()),
            move || handle::delete(&h2.arena(), &*e2, me(2), b),
        );
        released.unwrap();
        assert!(
            matches!(deleted, Ok(()) | Err(Fault::Expired)),
            "{deleted:?}"
        );
        let got = drain(&a, &env, 0);
        let want: Vec<Vec<u8>> = if deleted.is_ok() {
            vec![b"a".to_vec()]
        } else {
            vec![b"a".to_vec(), b"b".to_vec()]
        };
        assert_eq!(got, want);
        assert_clean(&a);
    });
}

/// Participant 1 writes a batch in place in one lent slot (`Queue::loan_batch`), one-byte
/// members `bodies` with dedup ids `keys` (member `j`'s key homed at `j`), laid out as a pack,
/// and sends it (`send::send_lent_pack`), dying at its `k`-th step; "a" (key "ka", homed at 0)
/// was sent before by participant 0, so a member "a" is its duplicate, answered and left out,
/// and the others are moved down over it; participant 2 meanwhile sends "c" to "g". After
/// recovery and a drain: the new members were all delivered or none, adjacent and in order
/// (delivered if 1's call returned them as sent), "a" exactly once (the original), nothing
/// twice; a repeat of each new member's key is a duplicate exactly when it was delivered;
/// every slot free (the lent slot linked, or freed by its lender or by recovery).
fn lent_pack_model(bodies: &'static [&'static [u8]], keys: &'static [&'static str]) {
    at_each_step(48, 6, |k| {
        model(move || {
            let h = arena_packs(3, 2, 3, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let a0 = h.arena();
            send_dedup(&a0, &env, 0, "g", b"a", "ka", 0).expect("the original of ka");
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (lent, single) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        let r = lent_pack(&h1.arena(), &e1, bodies, keys);
                        if crash::crashed() {
                            stopped();
                        }
                        r
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"c"),
            );
            single.expect("the single send is served");
            let a = h.arena();
            recovery::recover(&a, &*env, me(0)).unwrap();
            let got = drain(&a, &env, 0);
            assert_eq!(
                got.iter().filter(|x| x.as_slice() == b"a").count(),
                1,
                "{got:?}"
            );
            assert!(
                got.iter().any(|x| x.as_slice() == b"c"),
                "c delivered: {got:?}"
            );
            let new: Vec<usize> = (0..bodies.len()).filter(|&j| bodies[j] != b"a").collect();
            let at: Vec<Option<usize>> = new
                .iter()
                .map(|&j| got.iter().position(|x| x.as_slice() == bodies[j]))
                .collect();
            let delivered = match at.iter().all(Option::is_some) {
                true => {
                    for w in at.windows(2) {
                        assert_eq!(
                            w[1],
                            w[0].map(|p| p + 1),
                            "in order, nothing between: {got:?}"
                        );
                    }
                    true
                }
                false => {
                    assert!(at.iter().all(Option::is_none), "half a batch: {got:?}");
                    if let Ok(rs) = &lent {
                        assert!(
                            new.iter().all(|&j| rs[j].is_err()),
                            "a batch reported sent was lost: {got:?}"
                        );
                    }
                    false
                }
            };
            if let Ok(rs) = &lent {
                for (j, b) in bodies.iter().enumerate() {
                    if *b == b"a" {
                        assert!(
                            rs[j].as_ref().is_ok_and(|s| s.duplicate),
                            "a repeats ka: {rs:?}"
                        );
                    }
                }
            }
            let mut seen = got.clone();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), got.len(), "nothing twice: {got:?}");
            for &j in &new {
                let again = send_dedup(&a, &env, 0, "g", b"z", keys[j], j as u64)
                    .expect("a repeat of a new member's key");
                assert_eq!(
                    again.duplicate, delivered,
                    "{} deduplicated iff sent",
                    keys[j]
                );
                if !again.duplicate {
                    drain(&a, &env, 0);
                }
            }
            assert_clean(&a);
        });
    });
}

/// The duplicate first: the two after it are moved down over it and linked as one pack.
#[test]
fn a_lent_pack_leaves_its_duplicate_out_and_is_committed_whole() {
    lent_pack_model(&[b"a", b"x", b"y"], &["ka", "kx", "ky"]);
}

/// The duplicate between the two new members: only the last is moved (over it).
#[test]
fn a_lent_pack_leaves_a_duplicate_in_its_middle_out() {
    lent_pack_model(&[b"x", b"a", b"y"], &["kx", "ka", "ky"]);
}

/// One new member left: it goes as a message of its own (moved to the slot's start, its key
/// given back and reserved again by the send of one).
#[test]
fn a_lent_pack_with_one_new_member_sends_it_alone() {
    lent_pack_model(&[b"a", b"x"], &["ka", "kx"]);
}

/// [`lent_pack_model`]'s lender: a slot lent, one-byte members written at a pack's places,
/// sent as a lent pack. A member's key is homed at its index ("ka" at 0, as sent before).
fn lent_pack(
    a: &Arena<'_>,
    env: &MockEnv,
    bodies: &[&[u8]],
    keys: &'static [&'static str],
) -> PResult<Vec<PResult<send::Sent>>> {
    let lent = send::loan(a, env, me(1), 0, 1)?;
    let sizes = vec![(1, 0, 0); bodies.len()];
    let places = shmfifo::protocol::pack::lay_out(&sizes, usize::MAX)
        .ok_or(Fault::Corrupted("the members make a pack"))?;
    let (_, _, payload) = a.class_of(lent.idx)?;
    for (p, b) in places.members().iter().zip(bodies) {
        // SAFETY: the slot is lent to us (claimed, linked nowhere) and its class's 384 bytes
        // hold the pack's `used` bytes: each member's byte lies in its payload.
        unsafe { core::ptr::copy_nonoverlapping(b.as_ptr(), payload.add(p.at), 1) };
    }
    let parts: [&[u8]; 0] = [];
    let outs: Vec<Outgoing<'_>> = (0..bodies.len())
        .map(|j| Outgoing {
            class: 0,
            cursor: 1,
            hash: hash(b"g"),
            group_id: b"g",
            group_hint: None,
            lens: words::pack_lens(1, 0, 0, 0),
            parts: &parts,
            dedup: Some(key(keys[j], if keys[j] == "ka" { 0 } else { j as u64 })),
            source_len: 0,
            prior_receives: 0,
            loaned: None,
            in_place: 0,
        })
        .collect();
    let refs: Vec<Option<&Outgoing<'_>>> = outs.iter().map(Some).collect();
    let mut results = vec![Err(Fault::Expired); bodies.len()];
    send::send_lent_pack(a, env, me(1), lent, &refs, &places, &mut results)?;
    Ok(results)
}
