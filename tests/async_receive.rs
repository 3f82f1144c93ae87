//! `AsyncQueue` (feature `tokio`): long polls as futures. Many waiting tasks on a small runtime,
//! cancellation that takes nothing, expiries that wake waiters (R4), and an async consumer of
//! producer processes.

mod common;

use std::collections::HashSet;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use common::*;
use futures_core::Stream;
use shmfifo::{AsyncQueue, ReceiveOptions, SendMessage};

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo-test-worker");

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// 1,000 tasks wait at once on a 2-thread runtime; none holds a worker thread (a ticker task
/// keeps running), and 1,000 messages in 1,000 groups serve every one of them, once each.
#[test]
fn thousand_waiting_tasks_on_two_threads_are_all_served() {
    let tq = queue("async-1000", &small().max_groups(2048).max_messages(2048));
    let q = AsyncQueue::new(tq.q.clone());
    runtime().block_on(async {
        let mut tasks = Vec::new();
        for _ in 0..1000 {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                let opts = ReceiveOptions::max(1).wait(Duration::from_secs(20));
                let got = q.receive(&opts).await.unwrap();
                assert_eq!(got.len(), 1);
                q.queue().delete(&got[0].receipt_handle).unwrap();
                got[0].body.clone()
            }));
        }
        // While they wait, the runtime's two workers stay free: a ticker keeps ticking.
        let ticks = Arc::new(AtomicU64::new(0));
        let t = Arc::clone(&ticks);
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                t.fetch_add(1, Ordering::Relaxed);
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            tasks.iter().all(|t| !t.is_finished()),
            "a task returned before any message was sent"
        );
        assert!(
            ticks.load(Ordering::Relaxed) >= 10,
            "the runtime's workers were blocked while 1,000 tasks waited"
        );
        let producer = q.queue().clone();
        std::thread::spawn(move || {
            for i in 0..1000 {
                producer
                    .send(&SendMessage::new(&format!("g{i}"), &format!("m{i}")))
                    .unwrap();
            }
        });
        let mut bodies = HashSet::new();
        for t in tasks {
            let b = tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .expect("a waiting task was never served")
                .unwrap();
            assert!(bodies.insert(b), "a message was delivered twice");
        }
        assert_eq!(bodies.len(), 1000);
        ticker.abort();
    });
    assert_eq!(tq.attributes().approximate_number_of_messages, 0);
    assert_eq!(
        tq.attributes().approximate_number_of_messages_not_visible,
        0
    );
}

/// A receive future dropped after a message arrived, but before it was polled again, took
/// nothing: the message is visible, and its first receive counts 1.
#[test]
fn a_dropped_receive_takes_nothing() {
    let tq = queue("async-drop", &small());
    let q = AsyncQueue::new(tq.q.clone());
    runtime().block_on(async {
        let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
        let mut fut = Box::pin(q.receive(&opts));
        // Polled once: it is waiting.
        let first = poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
        assert!(first.is_pending());
        q.queue().send(&SendMessage::new("g", "kept")).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(fut);
        assert_eq!(q.queue().attributes().approximate_number_of_messages, 1);
        let got = q.queue().receive(&ReceiveOptions::max(10)).unwrap();
        assert_eq!(bodies(&got), ["kept"]);
        assert_eq!(got[0].receive_count, 1);
    });
}

/// A consumer loop on a queue that always has a message returns to the runtime now and then
/// (tokio's cooperative budget): every receive completed at its first poll, so such a loop on
/// a current-thread runtime never let another task run (a shutdown signal's included).
#[test]
fn a_busy_consumer_loop_lets_other_tasks_run() {
    let tq = queue("async-busy", &small());
    let q = AsyncQueue::new(tq.q.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
        q.queue().send(&SendMessage::new("g", "m")).unwrap();
        let opts = ReceiveOptions::max(1).wait(Duration::from_secs(1));
        for round in 0..10_000 {
            if ran.load(Ordering::SeqCst) {
                assert!(round > 0);
                return;
            }
            // One message in, one out: the queue never empties, so no receive waits.
            for m in q.receive(&opts).await.unwrap() {
                q.queue().send(&SendMessage::new("g", "m")).unwrap();
                q.queue().delete(&m.receipt_handle).unwrap();
            }
        }
        panic!("10,000 receives and the other task never ran");
    });
}

/// Receives cancelled en masse (aborted tasks, timeouts) while messages arrive: every message
/// is either returned by a receive that completed or still visible, never lost in between.
#[test]
fn cancelled_receives_lose_nothing() {
    let tq = queue("async-cancel", &small().max_groups(512));
    let q = AsyncQueue::new(tq.q.clone());
    runtime().block_on(async {
        let mut tasks = Vec::new();
        for i in 0..200 {
            let q = q.clone();
            tasks.push(tokio::spawn(async move {
                let opts = ReceiveOptions::max(1).wait(Duration::from_secs(20));
                if i % 2 == 0 {
                    q.receive(&opts).await.unwrap()
                } else {
                    // Half give up after a random-ish short time.
                    let d = Duration::from_micros(200 + 37 * i as u64);
                    tokio::time::timeout(d, q.receive(&opts))
                        .await
                        .map(|r| r.unwrap())
                        .unwrap_or_default()
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        for i in 0..150 {
            q.queue()
                .send(&SendMessage::new(&format!("g{i}"), &format!("m{i}")))
                .unwrap();
        }
        tokio::task::yield_now().await;
        for t in &tasks {
            t.abort();
        }
        let mut taken = HashSet::new();
        for t in tasks {
            if let Ok(v) = t.await {
                for m in v {
                    assert!(taken.insert(m.body.clone()), "delivered twice");
                    q.queue().delete(&m.receipt_handle).unwrap();
                }
            }
        }
        let mut rest = HashSet::new();
        loop {
            let got = q.queue().receive(&ReceiveOptions::max(10)).unwrap();
            if got.is_empty() {
                break;
            }
            for m in got {
                assert_eq!(
                    m.receive_count, 1,
                    "{} was taken by a cancelled receive",
                    m.body
                );
                assert!(rest.insert(m.body.clone()));
                q.queue().delete(&m.receipt_handle).unwrap();
            }
        }
        assert!(taken.is_disjoint(&rest));
        assert_eq!(taken.len() + rest.len(), 150, "messages were lost");
    });
}

/// A message whose visibility timeout ends wakes an async waiter (R4): nothing rings the
/// doorbell then, so the watcher must sleep no longer than the next expiry.
#[test]
fn a_visibility_expiry_wakes_a_waiting_task() {
    let tq = queue("async-expiry", &small());
    let q = AsyncQueue::new(tq.q.clone());
    runtime().block_on(async {
        q.queue().send(&SendMessage::new("g", "again")).unwrap();
        let vt = ReceiveOptions::max(1).visibility_timeout(Duration::from_millis(200));
        let first = q.receive(&vt).await.unwrap();
        assert_eq!(first.len(), 1);
        let start = Instant::now();
        let opts = ReceiveOptions::max(1).wait(Duration::from_secs(10));
        let again = q.receive(&opts).await.unwrap();
        let waited = start.elapsed();
        assert_eq!(bodies(&again), ["again"]);
        assert_eq!(again[0].receive_count, 2);
        assert!(
            waited < Duration::from_secs(5),
            "woken {waited:?} after an expiry due in 200 ms"
        );
    });
}

/// A wait with nothing to receive ends at its wait time with no messages (R5).
#[test]
fn an_empty_wait_ends_at_its_wait_time() {
    let tq = queue("async-empty", &small());
    let q = AsyncQueue::new(tq.q.clone());
    runtime().block_on(async {
        let start = Instant::now();
        let waits = q.queue().counters().waits;
        let opts = ReceiveOptions::max(10).wait(Duration::from_millis(150));
        assert!(q.receive(&opts).await.unwrap().is_empty());
        assert!(start.elapsed() >= Duration::from_millis(150));
        // Counted as a blocking receiver's sleep is (it counted none).
        assert!(q.queue().counters().waits > waits);
        // And a bad parameter is the blocking API's error.
        let bad = ReceiveOptions::max(11);
        assert_eq!(
            q.receive(&bad).await.unwrap_err().sqs_code(),
            "InvalidParameterValue"
        );
    });
}

/// The stream delivers a group in order (R1) and keeps waiting across empty polls.
#[test]
fn the_stream_delivers_in_order_across_waits() {
    let tq = queue("async-stream", &small());
    let q = AsyncQueue::new(tq.q.clone());
    runtime().block_on(async {
        let producer = q.queue().clone();
        std::thread::spawn(move || {
            for i in 0..50 {
                producer
                    .send(&SendMessage::new("g", &format!("m{i}")))
                    .unwrap();
                if i % 10 == 9 {
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
        });
        let mut stream = q.stream(ReceiveOptions::max(3).wait(Duration::from_millis(10)));
        for i in 0..50 {
            let m = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(m.body, format!("m{i}"));
            q.queue().delete(&m.receipt_handle).unwrap();
        }
    });
}

/// A stream dropped after yielding one message of a receive of five gives the other four back
/// at once (H6: a visibility change to zero), in order (R3, V3): not in flight, their group
/// locked, until their visibility timeout (30 s here).
#[test]
fn a_dropped_stream_gives_back_what_it_did_not_yield() {
    let tq = queue("async-stream-drop", &small());
    let q = AsyncQueue::new(tq.q.clone());
    for i in 0..5 {
        q.queue()
            .send(&SendMessage::new("g", &format!("m{i}")))
            .unwrap();
    }
    runtime().block_on(async {
        let opts = ReceiveOptions::max(10)
            .wait(Duration::from_millis(10))
            .visibility_timeout(Duration::from_secs(30));
        let mut stream = q.stream(opts);
        let first = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.body, "m0");
        drop(stream);
        q.queue().delete(&first.receipt_handle).unwrap();
    });
    let rest = q.queue().receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(
        rest.iter().map(|m| m.body.as_str()).collect::<Vec<_>>(),
        ["m1", "m2", "m3", "m4"]
    );
    assert!(
        rest.iter().all(|m| m.receive_count == 2),
        "received before, by the stream"
    );
}

/// Producer processes, one async consumer task per group set in this process: every message
/// arrives once, in order per group (R1, R3).
#[test]
fn an_async_consumer_of_producer_processes() {
    let tq = queue("async-mp", &small().max_groups(64));
    let q = AsyncQueue::new(tq.q.clone());
    let mut children = Vec::new();
    for p in 0..3 {
        children.push(
            std::process::Command::new(BIN)
                .args(["produce", &tq.name, &p.to_string(), "4", "300"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
    }
    // A stamp taken on receipt, before the delete: a group's next message can only be
    // received after that delete (R3), so stamps order each group's deliveries.
    let clock = Arc::new(AtomicU64::new(0));
    let got = runtime().block_on(async {
        let mut consumers = Vec::new();
        for _ in 0..4 {
            let q = q.clone();
            let clock = Arc::clone(&clock);
            consumers.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                let opts = ReceiveOptions::max(10).wait(Duration::from_millis(500));
                loop {
                    let batch = q.receive(&opts).await.unwrap();
                    if batch.is_empty() {
                        return seen;
                    }
                    for m in batch {
                        let stamp = clock.fetch_add(1, Ordering::SeqCst);
                        q.queue().delete(&m.receipt_handle).unwrap();
                        seen.push((m.group_id.clone(), m.body.clone(), m.sequence_number, stamp));
                    }
                }
            }));
        }
        let mut all = Vec::new();
        for c in consumers {
            all.extend(c.await.unwrap());
        }
        all
    });
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    assert_eq!(got.len(), 3 * 300, "messages lost or duplicated");
    let mut by_group: std::collections::HashMap<String, Vec<(u64, u64, u128)>> = Default::default();
    for (g, body, seq, stamp) in got {
        let k: u64 = body.rsplit(':').next().unwrap().parse().unwrap();
        by_group.entry(g).or_default().push((stamp, k, seq));
    }
    assert_eq!(by_group.len(), 12);
    for (g, mut v) in by_group {
        // In delivery order, the producer's counters run 0, 1, 2, … and the sequence
        // numbers grow (R1).
        v.sort_by_key(|&(stamp, _, _)| stamp);
        let ks: Vec<u64> = v.iter().map(|&(_, k, _)| k).collect();
        assert_eq!(ks, (0..ks.len() as u64).collect::<Vec<_>>(), "group {g}");
        assert!(v.windows(2).all(|w| w[0].2 < w[1].2), "group {g}");
    }
}

/// A named queue's file cut under a waiting task (to one page: the task's participant record
/// is past it; to nothing: the watcher's doorbell is too) does not kill the process with SIGBUS:
/// the watcher looks after its sleep, the task returns `Truncated` without touching the arena,
/// and so does every later receive of that handle; dropping the handle then is safe too.
#[test]
fn a_task_waiting_when_its_file_is_truncated_gets_an_error() {
    for cut in [4096, 0] {
        let name = unique("async-trunc");
        let path = format!("/dev/shm/{name}");
        // With `release_on_death` off the watcher sleeps up to a second, so the cut at 300 ms
        // lands while it and the task sleep, not at one of their periodic wake-ups (a cut
        // there, within an operation, is the documented SIGBUS).
        let cfg = small().max_messages(64).release_on_death(false);
        let q = AsyncQueue::new(shmfifo::Queue::create(&name, &cfg).unwrap());
        runtime().block_on(async {
            let waiter = {
                let q = q.clone();
                tokio::spawn(async move {
                    let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
                    q.receive(&opts).await
                })
            };
            // Asleep by now: the task awaits its notification, the watcher its futex.
            tokio::time::sleep(Duration::from_millis(300)).await;
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(cut)
                .unwrap();
            let got = tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("the waiting task ends within its watcher's sleep bound")
                .unwrap();
            let e = got.expect_err("no message: the file was cut");
            assert_eq!(e.code(), shmfifo::ErrorCode::Truncated, "cut to {cut}: {e}");
            let opts = ReceiveOptions::max(10).wait(Duration::from_secs(1));
            let again = q.receive(&opts).await.expect_err("still cut");
            assert_eq!(again.code(), shmfifo::ErrorCode::Truncated);
        });
        // Dropped: the watcher has ended; the handle skips its deregistration on a shrunk file.
        drop(q);
        std::fs::remove_file(&path).unwrap();
    }
}

/// A receive dropped while it waits (its caller's timeout, a `select!`) after the file was cut
/// under it, before anyone looked: the withdrawal looks first and leaves the record alone. The
/// watcher of a queue with `release_on_death` off sleeps up to a second, so it has not looked.
#[test]
fn a_receive_cancelled_after_its_file_was_truncated_does_not_touch_it() {
    let name = unique("async-trunc-cancel");
    let path = format!("/dev/shm/{name}");
    let cfg = small().max_messages(64).release_on_death(false);
    let q = AsyncQueue::new(shmfifo::Queue::create(&name, &cfg).unwrap());
    runtime().block_on(async {
        let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
        let waiter = {
            let q = q.clone();
            tokio::spawn(async move {
                let opts = ReceiveOptions::max(10).wait(Duration::from_secs(20));
                tokio::select! {
                    r = q.receive(&opts) => Some(r.map(|m| m.len())),
                    _ = cancelled => None,
                }
            })
        };
        // Asleep by now: the task awaits its notification, the watcher its futex (1 s).
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        cancel.send(()).unwrap();
        let r = waiter.await.unwrap();
        assert!(r.is_none(), "cancelled while it waited, not ended: {r:?}");
    });
    // The watcher wakes by its timeout, finds the cut and ends; the handle drops cleanly.
    drop(q);
    std::fs::remove_file(&path).unwrap();
}

/// R11: a retry with the same attempt id replays the recorded receive, on the runtime's
/// blocking pool, whatever the context the receive is awaited in: a `LocalSet` on a
/// multi-threaded runtime (where tokio refuses `block_in_place`, which a replay used before,
/// and panicked: a review's finding), a current-thread runtime, and a task of a
/// multi-threaded one. The replay answers the same message under the same receipt handle.
#[test]
fn a_replay_works_in_every_runtime_context() {
    let tq = queue("async-replay-ctx", &small());
    let q = AsyncQueue::new(tq.q.clone());
    let replay_twice = |q: AsyncQueue, id: &'static str| async move {
        let opts = ReceiveOptions::max(10).visibility_timeout(Duration::from_secs(600));
        let first = q.receive_with_attempt_id(&opts, id).await.unwrap();
        let again = q.receive_with_attempt_id(&opts, id).await.unwrap();
        assert_eq!(first.len(), 1, "{id}");
        assert_eq!(again.len(), 1, "{id}: replayed");
        assert_eq!(again[0].receipt_handle, first[0].receipt_handle, "{id}");
        q.queue().delete(&again[0].receipt_handle).unwrap();
    };
    let send = |k: &str| {
        tq.q.send(&SendMessage::new("g", k)).unwrap();
    };
    send("local-set");
    let rt = runtime();
    rt.block_on(tokio::task::LocalSet::new().run_until(replay_twice(q.clone(), "in-local-set")));
    send("current-thread");
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(replay_twice(q.clone(), "on-current-thread"));
    send("task");
    rt.block_on(async {
        tokio::spawn(replay_twice(q.clone(), "in-a-task"))
            .await
            .unwrap()
    });
}
