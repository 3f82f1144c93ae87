//! Models of the loaned sends and borrowed receives: a lender that stops forever (or
//! dies) at each step of a loan and its send, and a borrowed view validated against a
//! concurrent purge and reuse of its slot.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::handle::{first_not_taken, still_taken};
use shmfifo_loom_tests::*;

/// Participant 1 lends a slot, then sends it to "g" (the body written through the loan's
/// `Outgoing`, as `Loan::send` does once the bytes are in place).
fn loan_send(a: &Arena<'_>, env: &MockEnv, body: &[u8]) -> PResult<send::Sent> {
    let lent = send::loan(a, env, me(1), 0, 1)?;
    let parts = [body];
    send::send(
        a,
        env,
        me(1),
        &Outgoing {
            class: 0,
            cursor: 1,
            hash: hash(b"g"),
            group_id: b"g",
            group_hint: None,
            lens: words::pack_lens(body.len(), 0, 0, 0),
            parts: &parts,
            dedup: None,
            source_len: 0,
            prior_receives: 0,
            loaned: Some(lent),
            in_place: 0,
        },
    )
}

/// Participant 1 lends a slot and sends "x" through it, stopping forever at its `k`-th step
/// (alive: nothing it holds may be taken over). Participant 2 meanwhile sends "b" to the same
/// group and receives: never `Corrupted`. Then participant 1 is found dead and recovered:
/// "x" is delivered exactly when the link CAS committed it, "b" always, and every slot comes
/// back (a lent slot never linked is freed).
#[test]
fn a_lender_stopped_then_dead_at_each_step_loses_nothing() {
    at_each_step(32, 3, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (sent, (b, got)) = par(
                move || {
                    crash::arm(k);
                    let r = loan_send(&h1.arena(), &e1, b"x");
                    let crashed = crash::crashed();
                    (r, crashed)
                },
                move || {
                    let a = h2.arena();
                    let b = send(&a, &e2, 2, "g", b"b");
                    let got = recv(&a, &e2, 2, 10, 1_000);
                    (b, got)
                },
            );
            let (sent, crashed) = sent;
            if crashed {
                stopped();
            }
            assert!(!matches!(b, Err(Fault::Corrupted(_))), "send beside: {b:?}");
            assert!(!matches!(got, Err(Fault::Corrupted(_))), "receive beside");
            let a = h.arena();
            // Whatever 2 received is in flight: give it back (as its timeout would).
            let mut bodies: Vec<Vec<u8>> = Vec::new();
            for (hd, body) in got.unwrap_or_default() {
                handle::delete(&a, &*env, me(2), hd).expect("delete");
                bodies.push(body);
            }
            if crashed {
                env.kill(1);
                recovery::recover(&a, &*env, me(2)).expect("recover");
            }
            bodies.extend(drain(&a, &env, 2));
            let committed = sent.is_ok();
            let xs = bodies.iter().filter(|b| b.as_slice() == b"x").count();
            assert_eq!(
                xs,
                usize::from(committed),
                "x once iff committed: {bodies:?}"
            );
            if b.is_ok() {
                assert_eq!(
                    bodies.iter().filter(|x| x.as_slice() == b"b").count(),
                    1,
                    "b delivered once"
                );
            }
            assert_clean(&a);
        });
    });
}

/// Participant 1 lends two slots and sends them to "g" as one chain (the batch form,
/// `Queue::send_loans`), stopping forever at its `k`-th step; participant 2 sends "b" to "g"
/// meanwhile. Then 1 is found dead and recovered: its chain is delivered whole and in order
/// ("x1" before "x2", nothing between them) or not at all (invariant C), "b" once, and every
/// slot comes back.
#[test]
fn a_chain_of_loans_is_whole_or_nothing_when_its_lender_stops() {
    at_each_step(40, 5, |k| {
        model(move || {
            let h = arena(3, 2, 4);
            let env = Arc::new(MockEnv::default());
            env.advance(1);
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let ((res, crashed), b) = par(
                move || {
                    crash::arm(k);
                    let a = h1.arena();
                    let r = (|| {
                        let l1 = send::loan(&a, &*e1, me(1), 0, 1)?;
                        let l2 = send::loan(&a, &*e1, me(1), 0, 2)?;
                        let bodies: [&[u8]; 2] = [b"x1", b"x2"];
                        let parts: Vec<[&[u8]; 1]> = bodies.iter().map(|b| [*b]).collect();
                        let outs: Vec<Outgoing<'_>> = [l1, l2]
                            .iter()
                            .zip(&parts)
                            .map(|(l, p)| Outgoing {
                                class: 0,
                                cursor: 1,
                                hash: hash(b"g"),
                                group_id: b"g",
                                group_hint: None,
                                lens: words::pack_lens(2, 0, 0, 0),
                                parts: p,
                                dedup: None,
                                source_len: 0,
                                prior_receives: 0,
                                loaned: Some(*l),
                                in_place: 0,
                            })
                            .collect();
                        let refs: Vec<&Outgoing<'_>> = outs.iter().collect();
                        let mut results = vec![Err(Fault::Expired); 2];
                        send::send_chain(&a, &*e1, me(1), &refs, &mut results)?;
                        Ok::<_, Fault>(results)
                    })();
                    (r, crash::crashed())
                },
                move || send(&h2.arena(), &e2, 2, "g", b"b"),
            );
            if crashed {
                stopped();
            }
            assert!(!matches!(b, Err(Fault::Corrupted(_))), "send beside: {b:?}");
            let a = h.arena();
            if crashed {
                env.kill(1);
                recovery::recover(&a, &*env, me(2)).expect("recover");
            } else {
                let r = res.expect("a chain that was not stopped");
                assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
            }
            let got = drain(&a, &env, 2);
            let xs: Vec<&Vec<u8>> = got.iter().filter(|x| x.starts_with(b"x")).collect();
            assert!(
                xs.is_empty() || xs == [&b"x1".to_vec(), &b"x2".to_vec()],
                "whole or nothing, in order: {got:?}"
            );
            if let Some(p) = got.iter().position(|x| x.as_slice() == b"x1") {
                assert_eq!(
                    got.get(p + 1).map(Vec::as_slice),
                    Some(&b"x2"[..]),
                    "{got:?}"
                );
            }
            if b.is_ok() {
                assert_eq!(got.iter().filter(|x| x.as_slice() == b"b").count(), 1);
            }
            assert_clean(&a);
        });
    });
}

/// Participant 1 holds a borrowed view of "a" (received, in flight) and reads it in place (the
/// slot's `sent` word stands for a payload byte: `prepare` writes both after `pool::alloc`'s
/// Release fence), then validates it (`still_taken`). Participant 2 purges (freeing the slot
/// under the view) and sends "c", which reuses the only slot. Whenever the view validates, the
/// byte it read was "a"'s (SYNC POINT(peek-seqlock)); once the slot was reused, it never
/// validates.
#[test]
fn a_borrowed_view_never_validates_another_messages_bytes() {
    model(|| {
        let h = arena(3, 2, 1);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send(&a, &env, 0, "g", b"a").unwrap();
        let got = recv(&a, &env, 1, 1, 1_000).unwrap();
        let (hd, _) = got[0];
        let before = a.msg(hd.idx).unwrap().sent.load(Ordering::SeqCst);
        let (h1, h2, e2) = (h.clone(), h.clone(), env.clone());
        let ((read, ok), reused) = par(
            move || {
                let a = h1.arena();
                let read = a.msg(hd.idx).unwrap().sent.load(Ordering::Relaxed);
                let ok = still_taken(&a, hd).unwrap();
                (read, ok)
            },
            move || {
                let a = h2.arena();
                handle::purge(&a, &*e2, me(2)).expect("purge");
                e2.advance(5);
                send(&a, &e2, 2, "g", b"c").is_ok()
            },
        );
        if ok {
            assert_eq!(read, before, "validated a later message's bytes");
        }
        if reused {
            assert!(!still_taken(&h.arena(), hd).unwrap(), "reused, still valid");
        }
    });
}

/// Participant 1 holds a borrowed batch of a pack's two members (received, in flight), reads
/// them in place (the slot's `sent` word stands for their bytes, as above) and checks them at
/// once (`first_not_taken`: one fence, the slot's incarnation loaded before and after both
/// members' words). Participant 2 deletes the second member, then purges (freeing the pack
/// under the batch) and sends "c", which reuses the only slot. Whenever the batch checks out,
/// the bytes read were the pack's and the second member was not deleted yet; once the slot
/// is reused, the check names the first member; after the delete alone, the second
/// (SYNC POINT(peek-seqlock)).
#[test]
fn a_borrowed_batch_checked_at_once_never_validates_another_messages_bytes() {
    model(|| {
        let h = arena_packs(3, 2, 1, 0);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        let sent = send_pack(&a, &env, 0, "g", &[b"a", b"b"], None).unwrap();
        assert!(sent.iter().all(|r| r.is_ok()));
        let got = recv(&a, &env, 1, 10, 1_000).unwrap();
        let hs = [got[0].0, got[1].0];
        assert_eq!(hs[0].idx, hs[1].idx, "one pack");
        let before = a.msg(hs[0].idx).unwrap().sent.load(Ordering::SeqCst);
        let (h1, h2, e2) = (h.clone(), h.clone(), env.clone());
        let ((read, first), reused) = par(
            move || {
                let a = h1.arena();
                let read = a.msg(hs[0].idx).unwrap().sent.load(Ordering::Relaxed);
                (read, first_not_taken(&a, &hs).unwrap())
            },
            move || {
                let a = h2.arena();
                handle::delete(&a, &*e2, me(2), hs[1]).expect("delete");
                handle::purge(&a, &*e2, me(2)).expect("purge");
                e2.advance(5);
                send(&a, &e2, 2, "g", b"c").is_ok()
            },
        );
        if first.is_none() {
            assert_eq!(read, before, "validated a later message's bytes");
        }
        assert_eq!(
            first_not_taken(&h.arena(), &hs).unwrap(),
            Some(0),
            "purged (and reused: {reused}), still valid"
        );
        assert_eq!(first_not_taken(&h.arena(), &hs[1..]).unwrap(), Some(0));
    });
}

/// A pack's second member deleted alone: a batch check of both members names the second,
/// and the first alone still checks out (the members of one slot are checked each by its own
/// word, after one look at the slot).
#[test]
fn a_borrowed_batch_check_names_the_deleted_member() {
    model(|| {
        let h = arena_packs(3, 2, 1, 0);
        let env = Arc::new(MockEnv::default());
        env.advance(1);
        let a = h.arena();
        send_pack(&a, &env, 0, "g", &[b"a", b"b"], None).unwrap();
        let got = recv(&a, &env, 1, 10, 1_000).unwrap();
        let hs = [got[0].0, got[1].0];
        let (h1, h2, e2) = (h.clone(), h.clone(), env.clone());
        let (first, ()) = par(
            move || first_not_taken(&h1.arena(), &hs).unwrap(),
            move || handle::delete(&h2.arena(), &*e2, me(2), hs[1]).expect("delete"),
        );
        assert!(matches!(first, None | Some(1)), "{first:?}");
        assert_eq!(first_not_taken(&a, &hs).unwrap(), Some(1));
        assert_eq!(first_not_taken(&a, &hs[..1]).unwrap(), None);
    });
}
