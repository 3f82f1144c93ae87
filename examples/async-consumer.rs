//! Async consumers (cargo feature `tokio`): three tokio tasks share one queue through
//! `AsyncQueue`, each waiting in a long poll that is a future (no runtime thread is held while
//! it waits), while a producer thread sends to four groups; every message is received once and
//! each group in order. Then a `Stream` of messages, and a receive cancelled by a timeout,
//! which takes nothing. The queue is a file under /dev/shm that other processes could open by
//! its name (`Queue::open`); it is removed at the end.
//!
//! ```sh
//! cargo run --example async-consumer --features tokio
//! ```

use std::collections::HashMap;
use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_core::Stream;
use shmfifo::{AsyncQueue, Queue, QueueConfig, ReceiveOptions, SendMessage};

const GROUPS: u32 = 4;
const PER_GROUP: u32 = 50;

/// Removes the queue's file when dropped, however `main` ends.
struct Unlink(String);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = Queue::unlink(&self.0);
    }
}

/// What the consumers saw: the next message number expected in each group, and how many
/// messages came in all.
#[derive(Default)]
struct Seen {
    next: HashMap<String, u32>,
    total: u32,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let name = format!("shmfifo-async-example-{}", std::process::id());
    let cfg = QueueConfig::new().max_messages(1024).max_groups(64);
    let q = AsyncQueue::new(Queue::create(&name, &cfg)?);
    let _unlink = Unlink(name.clone());
    println!("queue /dev/shm/{name}: 3 async consumers, a producer thread, {GROUPS} groups");

    // The producer: a plain thread (it could be another process), sending with small pauses
    // so that the consumers wait in between.
    let producer = q.queue().clone();
    let sending = std::thread::spawn(move || -> shmfifo::Result<()> {
        for k in 0..PER_GROUP {
            for g in 0..GROUPS {
                let (group, body) = (format!("g{g}"), format!("g{g}:{k}"));
                producer.send(&SendMessage::new(&group, &body).dedup_id(&body))?;
            }
            if k % 10 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    });

    let all = GROUPS * PER_GROUP;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let started = Instant::now();
    let consumers: Vec<_> = (0..3)
        .map(|c| {
            let (q, seen) = (q.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                // One message at a time, so that the groups spread over the consumers.
                let opts = ReceiveOptions::max(1).wait(Duration::from_millis(200));
                let mut mine = 0;
                while seen.lock().unwrap().total < all {
                    // A long poll: this task sleeps as a future until a message comes (or
                    // 200 ms pass), and the runtime runs other tasks meanwhile.
                    for m in q.receive(&opts).await? {
                        {
                            let mut s = seen.lock().unwrap();
                            let k: u32 = m.body.rsplit_once(':').unwrap().1.parse().unwrap();
                            let next = s.next.entry(m.group_id.clone()).or_insert(0);
                            assert_eq!(k, *next, "group {} in order", m.group_id);
                            *next += 1;
                            s.total += 1;
                        }
                        // The work (another task runs meanwhile); then the delete, which
                        // releases the group's next message (to any consumer).
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        q.queue().delete(&m.receipt_handle)?;
                        mine += 1;
                    }
                }
                println!("consumer {c}: {mine} messages");
                Ok::<u32, shmfifo::Error>(mine)
            })
        })
        .collect();
    let mut total = 0;
    for c in consumers {
        total += c.await??;
    }
    sending.join().expect("the producer thread")?;
    assert_eq!(total, all, "every message received and deleted once");
    println!(
        "{total} messages in {:.0?}, each group in order",
        started.elapsed()
    );

    // A stream: receive after receive, each a long poll, in order.
    for i in 0..5 {
        let body = format!("tail:{i}");
        q.queue()
            .send(&SendMessage::new("tail", &body).dedup_id(&body))?;
    }
    let mut stream = q.stream(ReceiveOptions::max(10));
    let mut bodies = Vec::new();
    while bodies.len() < 5 {
        let m = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx))
            .await
            .expect("a stream ends only after an error")?;
        q.queue().delete(&m.receipt_handle)?;
        bodies.push(m.body);
    }
    println!("stream: {}", bodies.join(", "));

    // A receive future dropped before it completes takes nothing: here one cancelled by a
    // timeout while the queue is empty leaves nothing behind, and the message sent after it is
    // the next receive's, received once (tests/async_receive.rs races a send against the
    // cancel: `a_dropped_receive_takes_nothing`).
    let long = ReceiveOptions::max(1).wait(Duration::from_secs(20));
    let cancelled = tokio::time::timeout(Duration::from_millis(20), q.receive(&long)).await;
    assert!(
        cancelled.is_err(),
        "the empty queue kept the receive waiting"
    );
    q.queue()
        .send(&SendMessage::new("g0", "after").dedup_id("after"))?;
    let got = q.receive(&long).await?;
    assert_eq!(got[0].body, "after");
    q.queue().delete(&got[0].receipt_handle)?;
    println!("a receive cancelled by a timeout took nothing; done");
    Ok(())
}
