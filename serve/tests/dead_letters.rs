//! Dead-letter moves made by `shmfifo serve` (X1) stay within what the files' own permissions
//! give. A redrive policy lives in the queue's shared file, so any process that may open the
//! file may write one naming any path, without going through serve; a receive through serve
//! then moved messages with serve's rights into that path: a queue outside the served
//! directory, or one of the directory that the queue's users may not open (the trial: a user
//! of a shared 0666 queue moved a message into root's private queue through a root serve).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use shmfifo::{Queue, QueueConfig, ReceiveOptions, SendMessage};

#[path = "support/server.rs"]
mod server;
use server::{config, post_json, Dir, Server};

/// A queue of mode `mode` at `path`, deduplicating (a dead-letter queue must, D8).
fn queue(path: &Path, mode: u32) -> Queue {
    Queue::create_at(path, &QueueConfig::new().mode(mode)).unwrap()
}

/// Sets `q`'s redrive policy to `dlq` with maxReceiveCount 1 through the library, as any
/// process that may open the file can (the library checks what it can: the target exists).
fn policy_to(q: &Queue, dlq: &Path) {
    let policy = format!(
        r#"{{"deadLetterTargetArn":"{}","maxReceiveCount":1}}"#,
        dlq.display()
    );
    q.set_attribute("RedrivePolicy", &policy).unwrap();
}

/// Sends one message to `name` through serve and receives it twice, each time visible again
/// at once: the second receive is past maxReceiveCount 1, so it moves the message (X1) or says
/// why it cannot. Returns the second receive's status and answer.
fn received_past_the_count(srv: &Server, name: &str, dedup: &str) -> (u16, String) {
    let url = srv.url(name);
    let send = format!(
        r#"{{"QueueUrl":"{url}","MessageBody":"poison","MessageGroupId":"g","MessageDeduplicationId":"{dedup}"}}"#
    );
    let (status, out) = post_json(srv.addr, "SendMessage", &send);
    assert_eq!(status, 200, "{out}");
    let receive = format!(r#"{{"QueueUrl":"{url}","VisibilityTimeout":0}}"#);
    let (status, out) = post_json(srv.addr, "ReceiveMessage", &receive);
    assert_eq!(status, 200, "{out}");
    assert!(out.contains("poison"), "{out}");
    post_json(srv.addr, "ReceiveMessage", &receive)
}

fn messages(q: &Queue) -> u64 {
    let a = q.attributes();
    a.approximate_number_of_messages + a.approximate_number_of_messages_not_visible
}

/// X1 through serve: a move to a queue outside the served directory, or to one of it that a
/// user of the source may not open, is refused (the message stays in the source, the receive
/// says why); a move to a queue every user of the source may open is made.
#[test]
fn a_dead_letter_move_through_serve_stays_within_the_files_permissions() {
    let dir = Dir::new("dl-served");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let outside = Dir::new("dl-outside");
    let srv = Server::start(config(&dir.0));
    let shared = queue(&dir.0.join("shared.fifo"), 0o666);
    let secret = queue(&outside.0.join("secret.fifo"), 0o600);
    let private = queue(&dir.0.join("private.fifo"), 0o600);
    let open = queue(&dir.0.join("open.fifo"), 0o666);

    // A target outside the directory (written into the file, not through serve): refused.
    policy_to(&shared, &outside.0.join("secret.fifo"));
    let (status, out) = received_past_the_count(&srv, "shared.fifo", "1");
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("not a queue of the served directory"), "{out}");
    // Named by its name: its path outside the directory is the server's, not the client's.
    assert!(!out.contains(&*outside.0.to_string_lossy()), "{out}");
    assert_eq!(messages(&secret), 0, "nothing reached the queue outside");
    assert_eq!(messages(&shared), 1, "the message stays in its queue");
    shared.purge().unwrap();

    // A queue of the directory that every user of the 0666 source may not open: refused.
    policy_to(&shared, &dir.0.join("private.fifo"));
    let (status, out) = received_past_the_count(&srv, "shared.fifo", "2");
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("every user may open this queue"), "{out}");
    assert_eq!(messages(&private), 0);
    assert_eq!(messages(&shared), 1);
    shared.purge().unwrap();

    // One they all may open: moved, as X1 says.
    policy_to(&shared, &dir.0.join("open.fifo"));
    let (status, out) = received_past_the_count(&srv, "shared.fifo", "3");
    assert_eq!(status, 200, "{out}");
    assert!(!out.contains("poison"), "moved, not received: {out}");
    assert_eq!(messages(&shared), 0);
    let got = open.receive(&ReceiveOptions::max(10)).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].body, "poison");

    // A private source and a private dead-letter queue of one owner: moved (the owner may
    // open both, and no one else may open either).
    let mine = queue(&dir.0.join("mine.fifo"), 0o600);
    policy_to(&mine, &dir.0.join("private.fifo"));
    let (status, out) = received_past_the_count(&srv, "mine.fifo", "4");
    assert_eq!(status, 200, "{out}");
    assert_eq!(messages(&mine), 0);
    assert_eq!(messages(&private), 1);

    // The group rule: a source its group may open moves only to a target the same group may
    // open.
    let grouped = queue(&dir.0.join("grouped.fifo"), 0o660);
    policy_to(&grouped, &dir.0.join("private.fifo"));
    let (status, out) = received_past_the_count(&srv, "grouped.fifo", "6");
    assert_eq!(status, 400, "{out}");
    assert!(
        out.contains("may open this queue and not the dead-letter queue"),
        "{out}"
    );
    grouped.purge().unwrap();
    let shared_group = queue(&dir.0.join("group-dlq.fifo"), 0o660);
    policy_to(&grouped, &dir.0.join("group-dlq.fifo"));
    let (status, out) = received_past_the_count(&srv, "grouped.fifo", "7");
    assert_eq!(status, 200, "{out}");
    assert_eq!(messages(&shared_group), 1);

    // A name that is no longer a queue file (a FIFO put in its place): refused before the
    // server opens it at all.
    let swap = dir.0.join("swap.fifo");
    drop(queue(&swap, 0o666));
    policy_to(&shared, &swap);
    std::fs::remove_file(&swap).unwrap();
    let c = std::ffi::CString::new(swap.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    let (status, out) = received_past_the_count(&srv, "shared.fifo", "8");
    assert_eq!(status, 400, "{out}");
    assert!(
        out.contains("not a queue file of the served directory"),
        "{out}"
    );
    shared.purge().unwrap();

    // A dead-letter queue deleted while the policy names it: refused saying so (it read as a
    // failed security check).
    std::fs::remove_file(&swap).unwrap();
    let (status, out) = received_past_the_count(&srv, "shared.fifo", "9");
    assert_eq!(status, 400, "{out}");
    assert!(
        out.contains("swap.fifo: it does not exist (deleted?)"),
        "{out}"
    );
    shared.purge().unwrap();

    // The same queue opened by the library itself, not through serve, moves as before: the
    // check is serve's.
    policy_to(&shared, &outside.0.join("secret.fifo"));
    shared
        .send(&SendMessage::new("g", "direct").dedup_id("5"))
        .unwrap();
    let once = ReceiveOptions::default().visibility_timeout(std::time::Duration::ZERO);
    assert_eq!(shared.receive(&once).unwrap().len(), 1);
    assert!(shared.receive(&once).unwrap().is_empty());
    assert_eq!(messages(&secret), 1);
}

/// ListDeadLetterSourceQueues answered UnsupportedOperation, and StartMessageMoveTask took any
/// queue as its source (a queue no policy names answered COMPLETED, "to move 7, moved 0"; with a
/// destination it moved a live queue's messages). Now the sources are listed as SQS lists them,
/// and a move task's source must be some queue's dead-letter queue, as SQS requires.
#[test]
fn dead_letter_sources_are_listed_and_only_a_dead_letter_queue_is_a_move_source() {
    let dir = Dir::new("dl-sources");
    let srv = Server::start(config(&dir.0));
    let dlq = queue(&dir.0.join("dlq.fifo"), 0o600);
    let a = queue(&dir.0.join("a.fifo"), 0o600);
    let b = queue(&dir.0.join("b.fifo"), 0o600);
    let other = queue(&dir.0.join("other.fifo"), 0o600);
    policy_to(&b, &dir.0.join("dlq.fifo"));
    policy_to(&a, &dir.0.join("dlq.fifo"));
    other
        .send(&SendMessage::new("g", "live").dedup_id("1"))
        .unwrap();
    let (status, out) = post_json(
        srv.addr,
        "ListDeadLetterSourceQueues",
        &format!(r#"{{"QueueUrl":"{}"}}"#, srv.url("dlq.fifo")),
    );
    assert_eq!(status, 200, "{out}");
    let body = &out[out.find("\r\n\r\n").unwrap() + 4..];
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        v["queueUrls"],
        serde_json::json!([srv.url("a.fifo"), srv.url("b.fifo")])
    );
    // A queue no policy names: not a move task's source.
    let arn = |n: &str| format!("arn:aws:sqs:us-east-1:000000000000:{n}");
    let (status, out) = post_json(
        srv.addr,
        "StartMessageMoveTask",
        &format!(
            r#"{{"SourceArn":"{}","DestinationArn":"{}"}}"#,
            arn("other.fifo"),
            arn("a.fifo")
        ),
    );
    assert_eq!(status, 400, "{out}");
    assert!(out.contains("Dead Letter Queue"), "{out}");
    assert_eq!(messages(&other), 1, "nothing moved out of a live queue");
    let (status, out) = post_json(
        srv.addr,
        "StartMessageMoveTask",
        &format!(r#"{{"SourceArn":"{}"}}"#, arn("dlq.fifo")),
    );
    assert_eq!(status, 200, "{out}");
    drop(dlq);
}
