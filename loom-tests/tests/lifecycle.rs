//! Models of the lifecycle steps: the dead-letter move inside a receive (X1, D8) with a mover
//! that stops forever at each step, retention removal of an in-flight message racing with its
//! delete (T1, R8's count), and the redrive policy's two-buffer publication with a writer that
//! stops mid-write.
#![cfg(shmfifo_loom)]

use shmfifo::protocol::receive::{Policy, Taken};
use shmfifo::protocol::settings;
use shmfifo_loom_tests::*;

type Env = Arc<MockEnv>;

/// Receives from `src` as `who` with a redrive policy of `max` receives whose mover sends into
/// `dlq` with the message's slot and incarnation as dedup id (as the API sends its message
/// id, D8). Returns the bodies taken.
fn recv_moving(
    src: &Arena<'_>,
    dlq: &Arena<'_>,
    env: &MockEnv,
    who: u32,
    max: u32,
) -> PResult<Vec<Vec<u8>>> {
    let mut mover = |t: &Taken<'_>| -> bool {
        let key = format!("{}-{}", t.idx, t.inc);
        send_dedup(dlq, env, who, "g", t.payload, &key, hash(key.as_bytes())).is_ok()
    };
    let mut policy = Policy::new(0);
    policy.dead_letter = Some((max, &mut mover));
    let mut got = Vec::new();
    receive::receive(src, env, me(who), 10, &mut policy, &mut |t| {
        got.push(t.payload.to_vec());
        true
    })?;
    Ok(got)
}

/// X1, D8: two receivers race to move a message past its maxReceiveCount, and the first
/// stops forever at each step (inside its send to the dead-letter queue, or between that send
/// and the removal). After recovery and another receive, the dead-letter queue holds the
/// message exactly once and the source is empty.
#[test]
fn dead_letter_move_is_exactly_once_when_the_mover_dies() {
    for k in 0..14 {
        model(move || {
            let env: Env = Arc::new(MockEnv::default());
            env.advance(1); // arena time starts at 1 ms (a deadline of 0 means "never received")
            let src = arena(3, 1, 2);
            let dlq = arena_dedup(3, 1, 2, 4);
            send(&src.arena(), &env, 0, "g", b"m").unwrap();
            // One delivery with a zero visibility timeout: the next receive moves it.
            let first = recv_moving(&src.arena(), &dlq.arena(), &env, 0, 1).unwrap();
            assert_eq!(first, vec![b"m".to_vec()]);
            let (s1, d1, e1, s2, d2, e2) = (
                src.clone(),
                dlq.clone(),
                env.clone(),
                src.clone(),
                dlq.clone(),
                env.clone(),
            );
            let (x, y) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        recv_moving(&s1.arena(), &d1.arena(), &e1, 1, 1)
                    })
                },
                move || recv_moving(&s2.arena(), &d2.arena(), &e2, 2, 1),
            );
            assert!(
                x.as_ref().map_or(true, |v| v.is_empty()),
                "never delivered a 2nd time"
            );
            assert!(
                y.as_ref().map_or(true, |v| v.is_empty()),
                "never delivered a 2nd time"
            );
            if std::env::var_os("SHMFIFO_LOOM_VERBOSE").is_some() {
                eprintln!("k={k}: {x:?} {y:?}");
            }
            env.kill(1);
            let (s, d) = (src.arena(), dlq.arena());
            recovery::recover(&s, &*env, me(2)).unwrap();
            recovery::recover(&d, &*env, me(2)).unwrap();
            let again = recv_moving(&s, &d, &env, 2, 1).unwrap();
            assert!(again.is_empty());
            assert_eq!(
                drain(&d, &env, 2),
                vec![b"m".to_vec()],
                "exactly once (k={k}, x={x:?}, y={y:?})"
            );
            assert_eq!(drain(&s, &env, 2), Vec::<Vec<u8>>::new());
            assert_clean(&s);
            assert_eq!(
                accounting::in_flight(&s),
                0,
                "R8: the moved message left the count"
            );
        });
    }
}

/// T1: retention removes an in-flight message while its holder deletes it: exactly one of
/// them removes it, the in-flight count returns to zero, and everything is reclaimed.
#[test]
fn retention_removal_races_with_delete() {
    model(|| {
        let env: Env = Arc::new(MockEnv::default());
        let h = arena(3, 1, 2);
        let a = h.arena();
        a.hdr.retention_ms.store(50, Ordering::Relaxed);
        send(&a, &env, 0, "g", b"m").unwrap();
        let handle = recv(&a, &env, 0, 1, 1_000).unwrap()[0].0;
        assert_eq!(accounting::in_flight(&a), 1);
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (deleted, taken) = par(
            move || handle::delete(&h1.arena(), &*e1, me(0), handle),
            move || {
                e2.advance(60);
                recv(&h2.arena(), &e2, 1, 1, 1_000).unwrap()
            },
        );
        assert!(taken.is_empty(), "never delivered after its retention");
        recovery::recover(&a, &*env, me(2)).unwrap();
        let expiries: u64 = a
            .parts
            .iter()
            .map(|p| {
                p.counters[shmfifo::layout::counter::RETENTION_EXPIRIES].load(Ordering::SeqCst)
            })
            .sum();
        match deleted {
            Ok(()) => assert_eq!(expiries, 0),
            Err(Fault::Expired) => assert_eq!(expiries, 1),
            Err(f) => panic!("{f:?}"),
        }
        assert_eq!(accounting::in_flight(&a), 0);
        assert!(drain(&a, &env, 2).is_empty());
        assert_clean(&a);
    });
}

/// The redrive policy's two buffers: a writer stops forever at each step while a reader
/// reads; the reader sees the old or the new policy, never a mix; the next writer takes the
/// dead writer's claim over and publishes.
#[test]
fn redrive_policy_writer_dies_mid_write() {
    for k in 0..5 {
        model(move || {
            let env: Env = Arc::new(MockEnv::default());
            let h = arena(3, 1, 1);
            let (h1, e1, h2) = (h.clone(), env.clone(), h.clone());
            let (_, seen) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        settings::write(&h1.arena(), &*e1, me(1), 3, b"/dev/shm/dead-letters")
                    })
                },
                move || settings::read(&h2.arena()).unwrap(),
            );
            let path = &seen.path[..seen.path_len];
            assert!(
                (seen.max_receive_count == 0 && path.is_empty())
                    || (seen.max_receive_count == 3 && path == b"/dev/shm/dead-letters"),
                "torn read: {} {:?}",
                seen.max_receive_count,
                path
            );
            env.kill(1);
            let a = h.arena();
            settings::write(&a, &*env, me(2), 5, b"/q").unwrap();
            let p = settings::read(&a).unwrap();
            assert_eq!(
                (p.max_receive_count, &p.path[..p.path_len]),
                (5, &b"/q"[..])
            );
        });
    }
}

/// R11: an attempt-id recorder stops forever at each step while a reader looks the id up (it
/// finds nothing or the whole record); a later recorder takes the entry over; then a replay
/// races with a delete of the recorded message: the replay returns it with the same receipt or
/// reports a fresh receive is due, and everything is reclaimed.
#[test]
fn attempt_record_and_replay() {
    use shmfifo::protocol::attempt::{self, Record};
    for k in 0..3 {
        model(move || {
            let env: Env = Arc::new(MockEnv::default());
            env.advance(1);
            let h = arena(3, 1, 2);
            let a = h.arena();
            send(&a, &env, 0, "g", b"m").unwrap();
            let mut rec = Record {
                vt_ms: 1_000,
                count: 0,
                refs: [0; 10],
                vis: [0; 10],
            };
            let mut handle = None;
            receive::receive(&a, &*env, me(0), 1, &mut Policy::new(1_000), &mut |t| {
                rec.refs[0] = (u64::from(t.inc) << 32) | u64::from(t.idx);
                rec.vis[0] = t.vis;
                handle = Some(t.handle());
                true
            })
            .unwrap();
            rec.count = 1;
            let handle = handle.unwrap();
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (_, seen) = par(
                move || {
                    as_participant(&e1.clone(), 1, Some(k), || {
                        attempt::record(&h1.arena(), &*e1, me(1), 7, b"id", &rec)
                    })
                },
                move || attempt::find(&h2.arena(), e2.now.load(Ordering::SeqCst), 7, b"id"),
            );
            if let Some(r) = seen {
                assert_eq!(r, rec, "never a torn record");
            }
            env.kill(1);
            assert!(attempt::record(&a, &*env, me(2), 7, b"id", &rec));
            let found =
                attempt::find(&a, env.now.load(Ordering::SeqCst), 7, b"id").expect("recorded");
            let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
            let (replayed, deleted) = par(
                move || {
                    let mut got = Vec::new();
                    let ok = receive::replay(&h1.arena(), &*e1, me(2), &found, 1_000, &mut |t| {
                        got.push(t.epoch);
                        true
                    })
                    .unwrap();
                    (ok, got)
                },
                move || handle::delete(&h2.arena(), &*e2, me(0), handle),
            );
            if replayed.0 {
                assert_eq!(replayed.1, vec![handle.epoch], "the same receipt");
            }
            assert!(
                deleted.is_ok(),
                "a replay keeps the receipt, so its holder can still delete"
            );
            recovery::recover(&a, &*env, me(2)).unwrap();
            assert!(drain(&a, &env, 2).is_empty());
            assert_clean(&a);
            assert_eq!(accounting::in_flight(&a), 0);
        });
    }
}

/// L1, R4: a receive that meets a delayed head consumed its hint; a send to the same group
/// races with it. Once the delay ends, a plain receive (no explicit sweep: its own due sweep
/// must hint the delay-ended group) returns both messages in order.
#[test]
fn delayed_group_is_hinted_when_its_delay_ends() {
    model(|| {
        let env: Env = Arc::new(MockEnv::default());
        env.advance(1);
        let h = arena(3, 1, 2);
        let a = h.arena();
        a.hdr.delay_ms.store(10, Ordering::Relaxed);
        send(&a, &env, 0, "g", b"a").unwrap();
        let (h1, e1, h2, e2) = (h.clone(), env.clone(), h.clone(), env.clone());
        let (got, sent) = par(
            move || recv(&h1.arena(), &e1, 1, 10, 1_000).unwrap(),
            move || send(&h2.arena(), &e2, 2, "g", b"b"),
        );
        assert!(got.is_empty(), "delayed");
        sent.unwrap();
        env.advance(20);
        let got: Vec<Vec<u8>> = recv(&a, &env, 1, 10, 1_000)
            .unwrap()
            .into_iter()
            .map(|(_, b)| b)
            .collect();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);
    });
}
