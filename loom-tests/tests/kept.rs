//! Kept groups (layout 19, `protocol::release`, `protocol::kept`): the delete that empties a group
//! reopens its list at a new incarnation of its sentinel, and the group stays ACTIVE, idle, with
//! its key and its place in `active_groups`; the next send of the key appends to it with no insert,
//! and an insert at the capacity retires idle groups (under each one's claim: its sentinel's link
//! closed, then a plain tombstone counted out). Models: a send racing with that reclaim, a send to
//! a kept group racing with another key's insert in the same home (and with its reclaim and the
//! entry's reuse by that key) and with one from the home before, an insert at the capacity
//! reclaiming while another group is emptied, a reopen and a reclaim that each die at every step
//! beside a sender of the group, a sender to a kept group that dies at each step, and one that
//! stops forever.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::{group, inspect, kept, quarantine};
use shmfifo_loom_tests::*;

/// ACTIVE entries holding `id`.
fn entries_of(a: &Arena<'_>, id: &[u8]) -> usize {
    a.all_groups()
        .filter(|(_, e)| {
            let mut out = [0u8; shmfifo::layout::MAX_ID_LEN];
            let n = group::read_id(e, &mut out);
            gstate::kind(e.state.load(Ordering::SeqCst)) == gstate::ACTIVE && &out[..n] == id
        })
        .count()
}

/// Entries that count in `active_groups` (INSERTING, ACTIVE: kept groups are ACTIVE).
fn counted(a: &Arena<'_>) -> u64 {
    a.all_groups()
        .filter(|(_, e)| kept::counted_state(e.state.load(Ordering::SeqCst)))
        .count() as u64
}

/// Kept (idle) groups.
fn kept_groups(a: &Arena<'_>) -> usize {
    a.all_groups()
        .filter(|&(g, e)| {
            gstate::kind(e.state.load(Ordering::SeqCst)) == gstate::ACTIVE && kept::is_kept(a, g, e)
        })
        .count()
}

/// Sends `body` to `id` and receives and deletes it, so that the group is kept (on a queue
/// with no other message: the receive takes the first ready group's).
fn send_and_empty(a: &Arena<'_>, env: &MockEnv, id: &str, body: &[u8]) {
    send(a, env, 0, id, body).unwrap();
    let got = recv(a, env, 0, 1, 1_000).unwrap();
    assert_eq!(got.len(), 1);
    handle::delete(a, env, me(0), got[0].0).unwrap();
}

/// Two keys whose hashes share a home entry in a table of `slots` entries.
fn colliding(slots: u64) -> (String, String) {
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    let a0 = keys[0].clone();
    let b0 = keys
        .iter()
        .skip(1)
        .find(|k| hash(k.as_bytes()) % slots == hash(a0.as_bytes()) % slots)
        .unwrap()
        .clone();
    (a0, b0)
}

/// The delete that empties a group keeps it (ACTIVE, idle, its place in the count); its next
/// send appends to it with a later sequence number while a reclaim of the kept groups runs:
/// either the send's link CAS wins the sentinel's link (the reclaim's close fails, and it
/// releases the group, with its message) or the reclaim's close does (the group is retired, and
/// the send inserts it again, counted): one entry either way, the count equal to the entries
/// it covers, the message delivered.
#[test]
fn a_send_to_a_kept_group_races_with_its_reclaim() {
    model(|| {
        let h = arena(3, 2, 3);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        let first = send(&a, &env, 0, "g", b"1").unwrap();
        let got = recv(&a, &env, 0, 1, 1_000).unwrap();
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        assert_eq!(kept_groups(&a), 1, "the emptied group is kept");
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), 1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (s, freed) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"2"),
            move || kept::reclaim_kept(&h2.arena(), &*e2, me(2), true).unwrap(),
        );
        let s = s.expect("accepted");
        assert!(freed <= 1);
        assert!(
            (s.seq_hi, s.pos) > (first.seq_hi, first.pos),
            "the later message's sequence number follows the earlier one's"
        );
        assert_eq!(entries_of(&a, b"g"), 1, "one entry for the key");
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), counted(&a));
        assert_eq!(drain(&a, &env, 2), vec![b"2".to_vec()]);
        assert_clean(&a);
    });
}

/// A kept group's key is sent to (an append, no insert) while another key with the same home
/// is inserted (which may not take the kept entry: it is ACTIVE): each key ends with one
/// entry, each message is delivered, and the count covers exactly the entries in use.
#[test]
fn a_send_to_a_kept_group_races_with_another_keys_insert_in_its_home() {
    let (a0, b0) = colliding(4);
    model(move || {
        let h = arena(3, 2, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        send_and_empty(&a, &env, &a0, b"a1");
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = {
            let (a0, b0) = (a0.clone(), b0.clone());
            par(
                move || send(&h1.arena(), &e1, 1, &a0, b"a2"),
                move || send(&h2.arena(), &e2, 2, &b0, b"b1"),
            )
        };
        x.expect("appended");
        y.expect("inserted");
        assert_eq!(entries_of(&a, a0.as_bytes()), 1);
        assert_eq!(entries_of(&a, b0.as_bytes()), 1);
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), counted(&a));
        let mut got = drain(&a, &env, 0);
        got.sort();
        assert_eq!(got, vec![b"a2".to_vec(), b"b1".to_vec()]);
        assert_clean(&a);
    });
}

/// Receives and deletes everything, as `who`; returns (group id, body) pairs.
fn drain_with_groups(a: &Arena<'_>, env: &MockEnv, who: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut got = Vec::new();
    loop {
        let mut batch = Vec::new();
        receive::receive(
            a,
            env,
            me(who),
            10,
            &mut receive::Policy::new(1_000),
            &mut |t| {
                let mut id = [0u8; shmfifo::layout::MAX_ID_LEN];
                let n = t.group_id(&mut id);
                let h = t.handle();
                batch.push((h, id[..n].to_vec(), t.payload.to_vec()));
                true
            },
        )
        .expect("receive");
        if batch.is_empty() {
            return got;
        }
        for (h, id, body) in batch {
            handle::delete(a, env, me(who), h).expect("delete");
            got.push((id, body));
        }
    }
}

/// A sender of a kept group finds it ACTIVE, and before it reads the group's `tail`, the
/// group is reclaimed (retired to a tombstone) and another key whose home is the same entry
/// is inserted there (a new incarnation of the entry, its sentinel at a new incarnation, with
/// `tail` on it): the sender must not append to the other key's list (M3: a message keeps
/// its group id). Each body is delivered under its own group id.
#[test]
fn a_sender_that_looked_up_a_group_reclaimed_and_reused_by_another_key_keeps_its_group() {
    a_group_reclaimed_and_reused_by_another_key_under_a_sender(false);
}

/// As the model above, with the sender passing where its earlier send found the group
/// (`Outgoing::group_hint`, `group::recall`): that place names the entry at the incarnation
/// the reclaim retires and the other key's insert then reuses. Whether the recall comes before
/// the reclaim, between it and the reuse, or after, the sender must not append to the other
/// key's list (M3): each body is delivered under its own group id.
#[test]
fn a_sender_with_the_place_of_a_group_reclaimed_and_reused_by_another_key_keeps_its_group() {
    a_group_reclaimed_and_reused_by_another_key_under_a_sender(true);
}

/// The two models above: the sender of a kept group looks it up, or (`hinted`) passes where
/// its earlier send found it.
fn a_group_reclaimed_and_reused_by_another_key_under_a_sender(hinted: bool) {
    let (a0, b0) = colliding(4);
    model(move || {
        let h = arena(3, 2, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        let place = send(&a, &env, 0, &a0, b"a0").unwrap().group;
        assert!(place.is_some());
        let got = recv(&a, &env, 0, 1, 1_000).unwrap();
        assert_eq!(got.len(), 1);
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        let place = place.filter(|_| hinted);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (x, y) = {
            let (a0, b0) = (a0.clone(), b0.clone());
            par(
                move || send_hinted(&h1.arena(), &e1, 1, &a0, b"a1", place),
                move || {
                    let a = h2.arena();
                    kept::reclaim_kept(&a, &*e2, me(2), true).unwrap();
                    send(&a, &e2, 2, &b0, b"b1")
                },
            )
        };
        x.expect("sent");
        y.expect("sent");
        let mut got = drain_with_groups(&a, &env, 0);
        got.sort();
        let mut want = vec![
            (a0.as_bytes().to_vec(), b"a1".to_vec()),
            (b0.as_bytes().to_vec(), b"b1".to_vec()),
        ];
        want.sort();
        assert_eq!(got, want, "each message in its own group");
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), counted(&a));
        assert_clean(&a);
    });
}

/// A send to a kept group races with the insert of a key from the home before it, whose scan
/// passes an ACTIVE group there and the kept one (ACTIVE too: no room) on its way to room: one
/// entry per key, every message delivered, the count equal to the entries it covers.
#[test]
fn a_send_to_a_kept_group_races_with_an_insert_from_the_home_before() {
    // In a table of 8: `k` at home h, `x` and `k2` at home h - 1.
    let keys: Vec<String> = (0..256).map(|i| format!("k{i}")).collect();
    let home = |k: &String| hash(k.as_bytes()) % 8;
    let k = keys[0].clone();
    let before = (home(&k) + 7) % 8;
    let mut at_before = keys.iter().filter(|c| home(c) == before).cloned();
    let (x, k2) = (at_before.next().unwrap(), at_before.next().unwrap());
    model(move || {
        let h = arena(3, 3, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        send_and_empty(&a, &env, &k, b"k0");
        // x's home (h - 1) is FREE: it takes it.
        send(&a, &env, 0, &x, b"x1").unwrap();
        assert_eq!(kept_groups(&a), 1);
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), 2);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = {
            let (k, k2) = (k.clone(), k2.clone());
            par(
                move || send(&h1.arena(), &e1, 1, &k, b"k1"),
                move || send(&h2.arena(), &e2, 2, &k2, b"k2"),
            )
        };
        r1.expect("appended");
        r2.expect("inserted");
        for id in [&x, &k, &k2] {
            assert_eq!(entries_of(&a, id.as_bytes()), 1, "{id}");
        }
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), counted(&a));
        let mut got = drain(&a, &env, 0);
        got.sort();
        assert_eq!(got, vec![b"k1".to_vec(), b"k2".to_vec(), b"x1".to_vec()]);
        assert_clean(&a);
    });
}

/// An insert of a new group finds the table at its capacity (two groups: one with a message,
/// one kept): it retires the kept group into a plain tombstone, counted out, and counts itself
/// in, while a receiver empties the other group (which is kept meanwhile, or passed over while
/// its claim is held). The new group gets in, and the count equals the entries it covers.
#[test]
fn an_insert_at_the_capacity_reclaims_kept_groups_while_another_is_kept() {
    model(|| {
        let h = arena(3, 2, 4);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        send_and_empty(&a, &env, "k", b"k0");
        send(&a, &env, 0, "a", b"a1").unwrap();
        assert_eq!(
            a.hdr.active_groups.0.load(Ordering::SeqCst),
            2,
            "at the capacity"
        );
        assert_eq!(entries_of(&a, b"a"), 1);
        assert_eq!(counted(&a), 2, "k kept, a beside it");
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (n, emptied) = par(
            move || send(&h1.arena(), &e1, 1, "n", b"n1"),
            move || recv_and_delete(&h2.arena(), &e2, 2, 1, 1_000),
        );
        n.expect("the kept group makes room");
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), counted(&a));
        let mut got = drain(&a, &env, 0);
        got.extend(emptied);
        got.sort();
        assert_eq!(got, vec![b"a1".to_vec(), b"n1".to_vec()]);
        assert_clean(&a);
    });
}

/// A sender to a kept group dies at each step (its slot claimed, linked after the sentinel,
/// published or not) while another sender sends to the same group: the survivor's send is
/// accepted (after a retryable Busy while the dead one was not yet proven dead), into the one
/// entry of the group, and after recovery the queue drains clean.
#[test]
fn a_sender_to_a_kept_group_that_dies_at_each_step_leaves_the_group_usable() {
    at_each_step(24, 3, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let a = h.arena();
            send_and_empty(&a, &env, "g", b"0");
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (dead, other) = par(
                move || {
                    as_participant(&e1, 1, Some(k), || {
                        let r = send(&h1.arena(), &e1, 1, "g", b"x");
                        if crash::crashed() {
                            stopped();
                        }
                        r
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"y"),
            );
            let a = h.arena();
            let other = match other {
                Err(Fault::Busy(_)) => send(&a, &env, 2, "g", b"y"),
                r => r,
            };
            other.expect("the survivor's send is accepted");
            recovery::recover(&a, &*env, me(2)).expect("recovery");
            assert_eq!(entries_of(&a, b"g"), 1, "k={k}");
            let got = drain(&a, &env, 2);
            assert!(got.contains(&b"y".to_vec()), "k={k}: {got:?}");
            if dead.is_ok() {
                assert!(got.contains(&b"x".to_vec()), "k={k}: {got:?}");
            }
            assert_clean(&a);
        });
    });
}

/// A sender stopped forever (alive) at each step of a send to a kept group: a sender of another
/// group and a receiver are served; a second sender of the stopped one's group is served or
/// says `Busy` (retryable), never `Corrupted`.
#[test]
fn a_sender_to_a_kept_group_stopped_forever_holds_only_its_claims() {
    at_each_step(24, 3, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let a = h.arena();
            send(&a, &env, 0, "b", b"b1").unwrap();
            send_and_empty(&a, &env, "g", b"0");
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, (other, same, got)) = par(
                move || {
                    crash::arm(k);
                    // Stopped (not dead): the claims it holds stay held.
                    let _ = send(&h1.arena(), &e1, 1, "g", b"x");
                    if crash::crashed() {
                        stopped();
                    }
                },
                move || {
                    let a = h2.arena();
                    let other = send(&a, &e2, 2, "b", b"b2");
                    let same = send(&a, &e2, 2, "g", b"y");
                    let got = recv(&a, &e2, 2, 10, 1_000).expect("receive is served");
                    (other, same, got)
                },
            );
            other.expect("another group is served");
            assert!(matches!(same, Ok(_) | Err(Fault::Busy(_))), "{same:?}");
            assert!(!got.is_empty(), "the receiver is served");
        });
    });
}

/// Sends to group `g`, receives it, then deletes it as participant 0, dying at step `k` of the
/// delete (and its cleanup and reopen), while participant 2 sends `y` to the same group (again
/// after a retryable `Busy`, once the dead one is proven dead): the survivor's send must be
/// accepted. Returns the dead deleter's result.
fn delete_dying_beside_a_sender(h: &Arc<HeapArena>, env: &Arc<MockEnv>, k: u32) -> PResult<()> {
    let a = h.arena();
    send(&a, env, 0, "g", b"0").unwrap();
    let got = recv(&a, env, 0, 1, 1_000).unwrap();
    let hd = got[0].0;
    let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
    let (deleted, other) = par(
        move || {
            as_participant(&e1, 0, Some(k), || {
                let r = handle::delete(&h1.arena(), &*e1, me(0), hd);
                if crash::crashed() {
                    stopped();
                }
                r
            })
        },
        move || send(&h2.arena(), &e2, 2, "g", b"y"),
    );
    let other = match other {
        Err(Fault::Busy(_)) => send(&a, env, 2, "g", b"y"),
        r => r,
    };
    other.expect("the survivor's send is accepted");
    deleted
}

/// Sends `0` to group `g` and receives it as participant 0, then deletes it, stopped forever
/// (alive: its claims stay held) at step `k` of the delete, while `other` runs beside it.
/// Returns the delete's result and `other`'s.
fn delete_stopping_beside<T: 'static>(
    h: &Arc<HeapArena>,
    env: &Arc<MockEnv>,
    k: u32,
    other: impl FnOnce(Arc<HeapArena>, Arc<MockEnv>) -> T + 'static,
) -> (PResult<()>, T) {
    let a = h.arena();
    send(&a, env, 0, "g", b"0").unwrap();
    let hd = recv(&a, env, 0, 1, 1_000).unwrap()[0].0;
    let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
    par(
        move || {
            crash::arm(k);
            let r = handle::delete(&h1.arena(), &*e1, me(0), hd);
            if crash::crashed() {
                stopped();
            }
            r
        },
        move || other(h2, e2),
    )
}

/// Runs `check` after [`delete_dying_beside_a_sender`] at each step `k`, on an arena of
/// `slots` slots (three participants, two groups).
fn at_each_dying_delete(slots: u32, check: fn(&Arena<'_>, &Arc<MockEnv>, PResult<()>, u32)) {
    at_each_step(40, 6, |k| {
        model(move || {
            let h = arena(3, 2, slots);
            let env = Arc::new(MockEnv::default());
            let deleted = delete_dying_beside_a_sender(&h, &env, k);
            // Past the message's visibility timeout (1 s): a deleter that died holding the
            // group's claim before its mark (layout 25 marks under the claim) leaves it in
            // flight under its dead receiver, and it comes back then.
            env.advance(2_000);
            check(&h.arena(), &env, deleted, k);
        });
    });
}

/// What a queue drained after [`delete_dying_beside_a_sender`] holds (`got`, other groups'
/// messages left out): the survivor's `y`, after the first message if the dead delete did not
/// commit (its mark), which then comes back (its holder died; its timeout passed).
fn assert_survivor_after(deleted: &PResult<()>, got: &[Vec<u8>], k: u32) {
    let y = b"y".to_vec();
    if deleted.is_ok() {
        assert_eq!(got, [y], "k={k}");
    } else {
        assert!(
            got == [y.clone()] || got == [b"0".to_vec(), y],
            "k={k}: {got:?}"
        );
    }
}

/// The delete that empties a group, dying at each step of its cleanup (the run's swap, the
/// close, the reopen's sentinel and `pending_free` writes, its `head` store, its `tail` store,
/// the free) beside a sender of the same group, on an arena of two slots: the survivor's
/// message is accepted (or `Busy`, retryable, while the dead one was not yet proven dead),
/// and a message of another group then takes the slot the dead deleter freed, if it did.
/// After recovery every message is delivered once, nothing is left in flight or leaked, and
/// the group is kept with its one entry.
#[test]
fn a_reopen_that_dies_at_each_step_loses_nothing() {
    at_each_dying_delete(2, |a, env, deleted, k| {
        // The other slot, if the dead deleter freed it: full otherwise, until recovery.
        let z = send(a, env, 2, "o", b"z");
        assert!(
            matches!(z, Ok(_) | Err(Fault::ClassFull(_))),
            "k={k}: {z:?}"
        );
        recovery::recover(a, &**env, me(2)).expect("recovery");
        assert_eq!(entries_of(a, b"g"), 1, "k={k}");
        let mut got = drain(a, env, 2);
        if z.is_err() {
            send(a, env, 2, "o", b"z").expect("room once drained");
            got.extend(drain(a, env, 2));
        }
        assert_eq!(
            got.iter().filter(|m| m == &b"z").count(),
            1,
            "k={k}: {got:?}"
        );
        got.retain(|m| m != b"z");
        assert_survivor_after(&deleted, &got, k);
        assert_clean(a);
    });
}

/// A reclaim of kept groups dying at each step (the group's claim taken, its cleanup, the
/// close of its sentinel, the retire, the count) beside a sender of that group: the send is
/// accepted (into the group, or into a new entry once it is retired), and after recovery there
/// is one entry for the key, the message is delivered, and the count covers the entries.
#[test]
fn a_reclaim_that_dies_at_each_step_leaves_one_entry() {
    at_each_step(24, 2, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let a = h.arena();
            send_and_empty(&a, &env, "g", b"0");
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, other) = par(
                move || {
                    as_participant(&e1, 1, Some(k), || {
                        let r = kept::reclaim_kept(&h1.arena(), &*e1, me(1), true);
                        if crash::crashed() {
                            stopped();
                        }
                        r
                    })
                },
                move || send(&h2.arena(), &e2, 2, "g", b"y"),
            );
            let a = h.arena();
            let other = match other {
                Err(Fault::Busy(_)) => send(&a, &env, 2, "g", b"y"),
                r => r,
            };
            other.expect("the send is accepted");
            recovery::recover(&a, &*env, me(2)).expect("recovery");
            assert_eq!(entries_of(&a, b"g"), 1, "k={k}");
            assert_eq!(drain(&a, &env, 2), vec![b"y".to_vec()], "k={k}");
            let count = a.hdr.active_groups.0.load(Ordering::SeqCst);
            let census = counted(&a);
            assert!(
                (census..=census + 1).contains(&count),
                "k={k}: the count covers the entries in use, over by at most the dead one's"
            );
        });
    });
}

/// A delete emptying a group dies at each step of its cleanup while a sender sends to the
/// group; then a purge runs (before any recovery: it takes the dead deleter's claim over and
/// walks the list from `head` as the dead reopen left it). The purge removes every message sent
/// before it (P1), the survivor's included, whatever step the reopen reached: `head` never
/// stays behind a message an appender could link (layout 19: the reopen moves `head` to the new
/// sentinel before `tail`). After recovery nothing is delivered, leaked or left in flight.
#[test]
fn a_purge_after_a_reopen_that_died_at_each_step_misses_nothing() {
    at_each_dying_delete(3, |a, env, _, k| {
        handle::purge(a, &**env, me(2)).expect("purge");
        recovery::recover(a, &**env, me(2)).expect("recovery");
        assert_eq!(drain(a, env, 2), Vec::<Vec<u8>>::new(), "k={k}: P1");
        assert_clean(a);
    });
}

/// A delete emptying a group (its only message, behind the sentinel: layout 20 reopens the
/// list from the sentinel, with no swap of `head` onto the message first), stopped forever
/// (alive) at each step: the state it leaves reads as a sound group to every reader without
/// the claim. Between the reopen's sentinel store and its `head` store, `head` names the
/// sentinel's old incarnation, whose word holds the next one: that is an empty list, never a
/// damaged one (a quarantine would otherwise be suspected, and the inspection would call the
/// group damaged).
#[test]
fn a_reopen_from_the_sentinel_stopped_at_each_step_reads_as_sound() {
    at_each_step(40, 6, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let a = h.arena();
            // A reader racing the reopen: may see it mid-way, never an error.
            let (deleted, looked) = delete_stopping_beside(&h, &env, k, |h, env| {
                inspect::groups(&h.arena(), &*env, 4).map(|g| g.damaged.len())
            });
            assert!(looked.is_ok(), "k={k}: {looked:?}");
            let g = group::find(&a, hash(b"g"), b"g")
                .unwrap()
                .expect("g is kept")
                .0;
            assert!(
                !quarantine::suspect(&a, &*env, me(2), g),
                "k={k}: a group stopped mid-reopen is sound"
            );
            let seen = inspect::groups(&a, &*env, 4).expect("inspection");
            assert!(seen.damaged.is_empty(), "k={k}: {:?}", seen.damaged);
            let backlog: u64 = seen.largest.iter().map(|c| c.backlog()).sum();
            // The message, until the delete's CAS (a stopped delete may not have reached it).
            assert!(backlog <= 1, "k={k}: {backlog}");
            if deleted.is_ok() {
                assert_eq!(backlog, 0, "k={k}");
            }
            let (peeked, bad) = inspect::peek(&a, &*env, 10, &mut |t| Ok(t.idx)).expect("peek");
            assert!(
                peeked.len() <= 1 && bad.is_none(),
                "k={k}: {peeked:?} {bad:?}"
            );
        });
    });
}

/// A delete emptying a group from its sentinel dies at each step, beside a sender of the group;
/// then a quarantine pass runs before any recovery (it takes the dead deleter's claim over and
/// walks the list as the dead reopen left it): it finds no group to quarantine, whatever step
/// the reopen reached. After recovery the survivor's message is delivered once and nothing
/// leaks.
#[test]
fn a_reopen_from_the_sentinel_dead_at_each_step_is_never_quarantined() {
    at_each_dying_delete(3, |a, env, deleted, k| {
        assert_eq!(
            quarantine_all(a, env, 2).expect("quarantine pass"),
            0,
            "k={k}: nothing quarantined"
        );
        assert_eq!(a.hdr.quarantine.0.groups.load(Ordering::SeqCst), 0, "k={k}");
        recovery::recover(a, &**env, me(2)).expect("recovery");
        assert_survivor_after(&deleted, &drain(a, env, 2), k);
        assert_clean(a);
    });
}

/// A delete emptying a group, stopped forever (alive) at each step of its cleanup and reopen:
/// a sender of another group and a receiver of it are served; a sender of the stopped one's
/// group is served or says `Busy` (retryable: the stopped one holds the group's claim with its
/// list closed), never `Corrupted`.
#[test]
fn a_reopen_stopped_forever_blocks_only_its_group() {
    at_each_step(40, 6, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            let (_, (other, same, got)) = delete_stopping_beside(&h, &env, k, |h, env| {
                let a = h.arena();
                let other = send(&a, &env, 2, "b", b"b1");
                let same = send(&a, &env, 2, "g", b"y");
                let got = recv(&a, &env, 2, 10, 1_000).expect("receive is served");
                (other, same, got)
            });
            other.expect("another group is served");
            assert!(matches!(same, Ok(_) | Err(Fault::Busy(_))), "{same:?}");
            assert!(
                got.iter().any(|(_, b)| b == b"b1"),
                "the other group's message is received"
            );
        });
    });
}
