//! Kept groups (layout 17, `protocol::group`): the receive that empties a group retires it into
//! a kept entry that keeps its key and its place in `active_groups`; the next send of the key
//! revives it (writing neither the key nor the count), another key's insert may take it as its
//! room, and an insert at the capacity turns kept entries into plain tombstones. Models: a
//! revive racing with that reclaim, a revive racing with another key's insert in the same
//! home and with one from the home before (different home claims), an insert at the capacity
//! reclaiming while another group is kept, a reviver that dies at each step, and one that
//! stops forever.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::{group, kept};
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

/// Entries that count in `active_groups` (INSERTING, ACTIVE, kept).
fn counted(a: &Arena<'_>) -> u64 {
    a.all_groups()
        .filter(|(_, e)| kept::counted_state(e.state.load(Ordering::SeqCst)))
        .count() as u64
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

/// The receive that empties a group keeps it (its key, its incarnation, its place in the
/// count); its next send revives the same entry as a new incarnation with a later sequence
/// number, without a count of its own (the count stays 1), while a reclaim of the kept
/// groups runs: either the revive wins the entry (and the reclaim passes over it) or the
/// reclaim does (and the send inserts the group again, counted): one entry either way, the
/// count equal to the entries it covers, the message delivered.
#[test]
fn a_revive_races_with_the_reclaim_of_kept_groups() {
    model(|| {
        let h = arena(3, 2, 3);
        let env = Arc::new(MockEnv::default());
        let a = h.arena();
        let first = send(&a, &env, 0, "g", b"1").unwrap();
        let got = recv(&a, &env, 0, 1, 1_000).unwrap();
        handle::delete(&a, &*env, me(0), got[0].0).unwrap();
        let kept: Vec<u64> = a
            .all_groups()
            .map(|(_, e)| e.state.load(Ordering::SeqCst))
            .filter(|&st| gstate::is_kept(st))
            .collect();
        assert_eq!(kept.len(), 1, "the emptied group is kept");
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), 1);
        let (h1, e1, h2) = (h.clone(), env.clone(), h.clone());
        let (s, freed) = par(
            move || send(&h1.arena(), &e1, 1, "g", b"2"),
            move || kept::reclaim_kept(&h2.arena()).unwrap(),
        );
        let s = s.expect("accepted");
        assert!(freed <= 1);
        assert!(
            (s.seq_hi, s.pos) > (first.seq_hi, first.pos),
            "a later incarnation's sequence numbers follow the earlier ones'"
        );
        assert_eq!(entries_of(&a, b"g"), 1, "one entry for the key");
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), counted(&a));
        assert_eq!(drain(&a, &env, 2), vec![b"2".to_vec()]);
        assert_clean(&a);
    });
}

/// A kept group's key is revived by its own send while another key with the same home is
/// inserted (taking the kept entry as its room, or another): under the home claim exactly one
/// of them gets the kept entry; each key ends with one entry, each message is delivered, and
/// the count covers exactly the entries in use.
#[test]
fn a_revive_races_with_another_keys_insert_in_its_home() {
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
        x.expect("revived");
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

/// A kept group's revive races with the insert of a key from the home before it, whose scan
/// passes an ACTIVE group there and meets the kept entry as its first room: the two hold
/// different home claims, so they meet only at the kept entry's state word, where one CAS
/// wins; the other looks again (the reviver inserts its group afresh, counted, or the other
/// key takes the next room). One entry per key, every message delivered, the count equal to
/// the entries it covers.
#[test]
fn a_revive_races_with_a_reuse_from_the_home_before() {
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
        // x's home (h - 1) is FREE: it takes it, not k's kept entry.
        send(&a, &env, 0, &x, b"x1").unwrap();
        let kept = a.all_groups();
        assert_eq!(
            kept.filter(|(_, e)| gstate::is_kept(e.state.load(Ordering::SeqCst)))
                .count(),
            1
        );
        assert_eq!(a.hdr.active_groups.0.load(Ordering::SeqCst), 2);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (r1, r2) = {
            let (k, k2) = (k.clone(), k2.clone());
            par(
                move || send(&h1.arena(), &e1, 1, &k, b"k1"),
                move || send(&h2.arena(), &e2, 2, &k2, b"k2"),
            )
        };
        r1.expect("revived or inserted again");
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
/// one kept): it turns the kept group into a plain tombstone, counted out, and counts itself
/// in, while a receiver empties the other group (which is kept meanwhile). The new group gets
/// in, and the count equals the entries it covers.
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
            move || {
                let a = h2.arena();
                let got = recv(&a, &e2, 2, 1, 1_000).unwrap();
                for (hd, _) in &got {
                    handle::delete(&a, &*e2, me(2), *hd).unwrap();
                }
                got.into_iter().map(|(_, b)| b).collect::<Vec<_>>()
            },
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

/// A sender reviving a kept group dies at each step (holding the key's home claim, with the
/// entry INSERTING, or ACTIVE with nothing linked yet) while another sender sends to the same
/// group: the survivor's send is accepted (after a retryable Busy while the dead one was not
/// yet proven dead), into the one entry of the group, and after recovery the queue drains clean.
#[test]
fn a_reviver_that_dies_at_each_step_leaves_the_group_usable() {
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

/// A sender stopped forever (alive) at each step of a kept group's revive: a sender of another
/// group and a receiver are served; a second sender of the stopped one's group is served or
/// says `Busy` (retryable: the stopped one holds the key's home claim, or the entry INSERTING),
/// never `Corrupted`.
#[test]
fn a_reviver_stopped_forever_holds_only_its_claims() {
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
