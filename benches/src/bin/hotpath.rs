//! `shmfifo-hotpath MODE N`: N rounds of one hot-path workload in one process, for
//! `benches/callgrind.sh`, which runs it under callgrind at two N and divides the difference by
//! the messages in between (so setup and teardown cancel out), giving the deterministic figures
//! per message: instructions, locked (atomic read-modify-write) instructions and clock reads.
//!
//! Modes (64-byte bodies, an anonymous queue with the default settings unless said):
//! * `single`: `send` + `receive_into` (max 1, no wait) + `delete`, one group, dedup off.
//! * `batch`: `send_batch` of 10 to one group + `receive_into` (max 10) + `delete_batch`, dedup
//!   off (the receipt handles formatted as the batch API takes them: included); the ten go as
//!   one pack, as every batch to one group does by default (layout 23).
//! * `batch-typed`: as `batch` without batch entry ids: sending with `send_messages`, deleting
//!   with `delete_handles` (typed handles: no handle text).
//! * `batch-slots`: as `batch-typed`, one slot a message (`Queue::set_pack_batches(false)`,
//!   the only way before layout 22).
//! * `newgroup`: as `single`, with a new group id per message (SQS's advice for deduplication
//!   without ordering).
//! * `dedup`: as `single`, with a new dedup id per message at the settings users get (SQS's
//!   5-minute interval, the default table).
//! * `dedup-batch`: as `batch-typed`, with a new dedup id per message at the settings users
//!   get (the ten ids of a batch reserved in the dedup table, one pack a batch).
//! * `kept`: as `single`, with one more message always queued in the group, so the group never
//!   empties (no retire and re-insert per message).
//! * `grown`: as `single` on a queue that grew to 4 × 8,192 small slots (filled and drained
//!   before the rounds: its producer takes slots of the added segments); `presized`: the same
//!   on a queue created with them (layout 13: the steady state after growth).
//! * `empty`: an empty poll (`receive_into` on an empty queue, no wait); N polls.
//! * `batch-lent`: the zero-copy batch: `loan_batch` of 10 members to one group, each body
//!   written in place, `LoanBatch::send` (one pack, no copy), `receive_into` (max 10),
//!   `delete_handles`; dedup off.
//! * `batch-loans`: as `batch-lent` with a loan a message sent by `send_loans` (ten slots, one
//!   chain: how a loaned batch went before `loan_batch`).
//! * `batch-lent-zc`: the zero-copy batch both ways: as `batch-lent`, received by
//!   `receive_borrowed_into` (each body read in place, its first byte, then the batch checked
//!   at once: `BorrowedBatch::verify`).
//! * `large`: as `single` with a 64 KiB body (text: the S7 check on send, the UTF-8 check of
//!   the copy on receive).
//! * `large-zc`: the zero-copy forms with a 64 KiB body: `loan`, the body copied
//!   into the loan (the producer writing its payload), `send_with`, `receive_borrowed`, the
//!   body's first and last bytes read, `verify`, `delete`.

use std::time::Duration;

use shmfifo::{
    BatchEntry, Deduplication, LoanOptions, Queue, QueueConfig, ReceiveBuffer, ReceiveOptions,
    SendMessage,
};

const BODY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const IDS: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// Decimal ids 1, 2, 3 … written in place (a digit incremented with its carries).
struct Counter {
    digits: [u8; 20],
    from: usize,
}

impl Default for Counter {
    fn default() -> Self {
        Counter {
            digits: [b'0'; 20],
            from: 19,
        }
    }
}

impl Counter {
    fn next_id(&mut self) -> &str {
        let mut k = self.digits.len();
        loop {
            k -= 1;
            if self.digits[k] == b'9' {
                self.digits[k] = b'0';
            } else {
                self.digits[k] += 1;
                break;
            }
        }
        self.from = self.from.min(k);
        std::str::from_utf8(&self.digits[self.from..]).expect("ASCII digits")
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, n) = match args.as_slice() {
        [m, n] => (m.as_str(), n.parse::<u64>().expect("N: a number of rounds")),
        _ => {
            eprintln!(
                "usage: shmfifo-hotpath single|batch|batch-typed|batch-slots|batch-lent|batch-loans|batch-lent-zc|newgroup|dedup|dedup-batch|kept|grown|presized|empty|large|large-zc N"
            );
            std::process::exit(2);
        }
    };
    let off = QueueConfig::new().deduplication(Deduplication::Off);
    let cfg = if mode == "dedup" || mode == "dedup-batch" {
        QueueConfig::new()
    } else {
        off
    };
    let cfg = if mode == "presized" {
        cfg.max_messages(4 * 8_192)
    } else {
        cfg
    };
    // The default limit, 1 GiB, whatever /dev/shm has free (its default is a share of the free
    // space: `grown` needs room for two added segments of the small class).
    let cfg = cfg.size_limit(shmfifo::DEFAULT_SIZE_LIMIT);
    let q = Queue::create_anonymous(&cfg).expect("create");
    if mode == "grown" || mode == "presized" {
        // 4 × 8,192 messages in, then all out: the producer's cursor is past them.
        for _ in 0..4 * 8_192 {
            q.send(&SendMessage::new("fill", BODY)).expect("fill");
        }
        let mut buf = ReceiveBuffer::new();
        let ten = ReceiveOptions::max(10).wait(Duration::ZERO);
        loop {
            let k = q.receive_into(&ten, &mut buf).expect("drain");
            if k == 0 {
                break;
            }
            let handles: Vec<_> = buf.messages().iter().map(|m| m.receipt_handle).collect();
            for r in q.delete_handles(&handles).expect("delete") {
                r.expect("deleted");
            }
        }
        assert_eq!(q.size().grows > 0, mode == "grown");
    }
    let mut buf = ReceiveBuffer::new();
    let one = ReceiveOptions::max(1).wait(Duration::ZERO);
    let ten = ReceiveOptions::max(10).wait(Duration::ZERO);
    if mode == "kept" {
        q.send(&SendMessage::new("g", BODY)).expect("send");
    }
    let large: String = (0..65_536)
        .map(|i| (b'a' + (i % 26) as u8) as char)
        .collect();
    // A batch of 10 to one group, then a receive of the 10 (the batch modes' first half):
    // with batch entry ids (`send_batch`) or without (`send_messages`, typed).
    let send_and_receive_ten = |buf: &mut ReceiveBuffer, typed: bool| {
        if typed {
            let msgs: [SendMessage<'_>; 10] = std::array::from_fn(|_| SendMessage::new("g", BODY));
            for r in q.send_messages(&msgs).expect("send_messages") {
                r.expect("message sent");
            }
        } else {
            let entries: [BatchEntry<'_, SendMessage<'_>>; 10] =
                std::array::from_fn(|k| BatchEntry {
                    id: IDS[k],
                    entry: SendMessage::new("g", BODY),
                });
            for r in q.send_batch(&entries).expect("send_batch") {
                r.result.expect("entry sent");
            }
        }
        assert_eq!(q.receive_into(&ten, buf).expect("receive"), 10);
    };
    match mode {
        "large" => {
            for _ in 0..n {
                q.send(&SendMessage::new("g", &large)).expect("send");
                assert_eq!(q.receive_into(&one, &mut buf).expect("receive"), 1);
                q.delete(&buf.messages()[0].receipt_handle).expect("delete");
            }
        }
        "large-zc" => {
            let mut touched = 0u64;
            for _ in 0..n {
                let mut loan = q.loan("g", large.len()).expect("loan");
                loan.as_mut_slice().copy_from_slice(large.as_bytes());
                loan.send().expect("send");
                for m in q.receive_borrowed(&one).expect("receive") {
                    let b = m.body();
                    touched += u64::from(b[0]) + u64::from(b[b.len() - 1]);
                    m.verify().expect("verify");
                    m.delete().expect("delete");
                }
            }
            std::hint::black_box(touched);
        }
        "single" | "newgroup" | "dedup" | "kept" | "grown" | "presized" => {
            let mut ids = Counter::default();
            for _ in 0..n {
                // A new id per round only where the mode uses one (a counter in place, so
                // that the figures count the queue, not `fmt`).
                let id = if mode == "newgroup" || mode == "dedup" {
                    ids.next_id()
                } else {
                    "0"
                };
                let group = if mode == "newgroup" { id } else { "g" };
                let mut m = SendMessage::new(group, BODY);
                if mode == "dedup" {
                    m = m.dedup_id(id);
                }
                q.send(&m).expect("send");
                assert_eq!(q.receive_into(&one, &mut buf).expect("receive"), 1);
                q.delete(&buf.messages()[0].receipt_handle).expect("delete");
            }
        }
        "batch" => {
            let mut handles: Vec<String> = Vec::with_capacity(10);
            for _ in 0..n {
                send_and_receive_ten(&mut buf, false);
                handles.clear();
                handles.extend(buf.messages().iter().map(|m| m.receipt_handle.to_string()));
                let del: Vec<BatchEntry<'_, &str>> = handles
                    .iter()
                    .zip(IDS)
                    .map(|(h, id)| BatchEntry {
                        id,
                        entry: h.as_str(),
                    })
                    .collect();
                for r in q.delete_batch(&del).expect("delete_batch") {
                    r.result.expect("entry deleted");
                }
            }
        }
        "batch-typed" | "batch-slots" => {
            // `batch-slots`: one slot a message (packs are the default).
            q.set_pack_batches(mode != "batch-slots");
            let mut handles = Vec::with_capacity(10);
            for _ in 0..n {
                send_and_receive_ten(&mut buf, true);
                handles.clear();
                handles.extend(buf.messages().iter().map(|m| m.receipt_handle));
                for r in q.delete_handles(&handles).expect("delete_handles") {
                    r.expect("handle deleted");
                }
            }
        }
        "batch-lent" | "batch-loans" | "batch-lent-zc" => {
            let borrow = mode == "batch-lent-zc";
            let members = [(BODY.len(), LoanOptions::new()); 10];
            let mut handles = Vec::with_capacity(10);
            for _ in 0..n {
                if mode != "batch-loans" {
                    let mut batch = q.loan_batch("g", &members).expect("loan_batch");
                    for k in 0..10 {
                        batch.body_mut(k).copy_from_slice(BODY.as_bytes());
                    }
                    for r in batch.send().expect("send the loaned batch") {
                        r.expect("member sent");
                    }
                } else {
                    let loans: Vec<_> = (0..10)
                        .map(|_| {
                            let mut loan = q.loan("g", BODY.len()).expect("loan");
                            loan.as_mut_slice().copy_from_slice(BODY.as_bytes());
                            (loan, LoanOptions::new())
                        })
                        .collect();
                    for r in q.send_loans(loans) {
                        r.expect("loan sent");
                    }
                }
                handles.clear();
                if borrow {
                    let got = q.receive_borrowed_into(&ten, &mut buf).expect("receive");
                    assert_eq!(got.len(), 10);
                    for m in got.iter() {
                        std::hint::black_box(m.body()[0]);
                    }
                    got.verify().expect("verify the batch");
                    handles.extend(got.iter().map(|m| *m.receipt_handle()));
                } else {
                    assert_eq!(q.receive_into(&ten, &mut buf).expect("receive"), 10);
                    handles.extend(buf.messages().iter().map(|m| m.receipt_handle));
                }
                for r in q.delete_handles(&handles).expect("delete_handles") {
                    r.expect("handle deleted");
                }
            }
        }
        "dedup-batch" => {
            // As `batch-typed`, each message with a new dedup id (the settings users get).
            let mut ids = Counter::default();
            let mut texts = [[0u8; 20]; 10];
            let mut lens = [0usize; 10];
            let mut handles = Vec::with_capacity(10);
            for _ in 0..n {
                for (t, l) in texts.iter_mut().zip(lens.iter_mut()) {
                    let id = ids.next_id();
                    t[..id.len()].copy_from_slice(id.as_bytes());
                    *l = id.len();
                }
                let msgs: [SendMessage<'_>; 10] = std::array::from_fn(|k| {
                    let id = std::str::from_utf8(&texts[k][..lens[k]]).expect("ascii");
                    SendMessage::new("g", BODY).dedup_id(id)
                });
                for r in q.send_messages(&msgs).expect("send_messages") {
                    r.expect("message sent");
                }
                assert_eq!(q.receive_into(&ten, &mut buf).expect("receive"), 10);
                handles.clear();
                handles.extend(buf.messages().iter().map(|m| m.receipt_handle));
                for r in q.delete_handles(&handles).expect("delete_handles") {
                    r.expect("handle deleted");
                }
            }
        }
        "empty" => {
            for _ in 0..n {
                assert_eq!(q.receive_into(&one, &mut buf).expect("receive"), 0);
            }
        }
        m => {
            eprintln!("unknown mode {m}");
            std::process::exit(2);
        }
    }
}
