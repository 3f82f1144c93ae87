//! No stall: two consumers that long-poll (200 ms) and give up after two empty polls once the
//! producer is done leave nothing visible behind. A receive whose instant was read before the
//! producer stamped a message took it for a delayed one (L1, with no delay) and left it to a
//! periodic sweep, up to a second later: every run of this test stalled so before the fix
//! (loom: `a_receiver_whose_instant_is_older_than_the_send_takes_the_message`).
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};

#[test]
fn two_consumers_leave_nothing_visible_behind() {
    for round in 0..5 {
        let name = format!("no-stall-{}-{round}", std::process::id());
        let _ = Queue::unlink(&name);
        let q = Queue::create(&name, &QueueConfig::new().max_messages(8192)).unwrap();
        // Two consumers, each its own handle (participant), long-polling.
        let done = Arc::new(AtomicBool::new(false));
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let name = name.clone();
                let done = done.clone();
                std::thread::spawn(move || {
                    let c = Queue::open(&name).unwrap();
                    let o = ReceiveOptions::max(10)
                        .visibility_timeout(Duration::from_secs(30))
                        .wait(Duration::from_millis(200));
                    let mut empties = 0;
                    while empties < 2 {
                        let got = c.receive(&o).unwrap();
                        if got.is_empty() {
                            if done.load(Ordering::Acquire) {
                                empties += 1;
                            }
                            continue;
                        }
                        empties = 0;
                        for m in got {
                            c.delete(&m.receipt_handle).unwrap();
                        }
                    }
                })
            })
            .collect();
        for k in 0..150 {
            for g in 0..20 {
                let b = format!("g{g}:{k}");
                q.send(&SendMessage::new(&format!("g{g}"), &b).dedup_id(&b))
                    .unwrap();
            }
        }
        done.store(true, Ordering::Release);
        for c in consumers {
            c.join().unwrap();
        }
        let a = q.attributes();
        let left = q.inspect(3).unwrap().largest_groups;
        assert_eq!(
            (
                a.approximate_number_of_messages,
                a.approximate_number_of_messages_not_visible
            ),
            (0, 0),
            "round {round}: left visible (and in flight) after both consumers gave up: {left:?}"
        );
        drop(q);
        let _ = Queue::unlink(&name);
    }
}
