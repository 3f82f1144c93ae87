//! The `shmfifo` binary against real arenas under /dev/shm: every subcommand, the JSON output
//! field by field, exit codes and hints, and processes that share a queue (every invocation
//! is its own process).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use assert_cmd::Command;
use serde_json::Value;

static N: AtomicU32 = AtomicU32::new(0);

const BIN: &str = env!("CARGO_BIN_EXE_shmfifo");

/// A unique queue name; the queue file (or a path) is removed on drop.
struct Q {
    /// The queue argument: a name, or a path.
    arg: String,
}

impl Q {
    fn named(tag: &str) -> Q {
        Q {
            arg: format!(
                "shmfifo-cli-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ),
        }
    }
    fn at(path: &Path) -> Q {
        Q {
            arg: path.display().to_string(),
        }
    }
    fn path(&self) -> PathBuf {
        if self.arg.contains('/') {
            PathBuf::from(&self.arg)
        } else {
            Path::new("/dev/shm").join(&self.arg)
        }
    }
    fn s(&self) -> &str {
        &self.arg
    }
}

impl Drop for Q {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path());
    }
}

/// A directory under /dev/shm, removed (with its files) on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = Path::new("/dev/shm").join(format!(
            "shmfifo-cli-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Small queues: quick to create, little memory.
const SMALL: &[&str] = &[
    "--max-messages",
    "64",
    "--max-groups",
    "64",
    "--maximum-message-size",
    "4KiB",
    "--dedup-entries",
    "256",
];

fn cmd(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args);
    c
}

/// Runs and checks the exit code; returns stdout and stderr.
fn expect(args: &[&str], code: i32) -> (String, String) {
    let out = cmd(args).output().unwrap();
    let (o, e) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(
        out.status.code(),
        Some(code),
        "shmfifo {args:?}\nstdout: {o}\nstderr: {e}"
    );
    (o, e)
}

/// Runs with `--json` and exit code `code`; parses stdout.
fn json_code(args: &[&str], code: i32) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let (o, _) = expect(&a, code);
    serde_json::from_str(&o).unwrap_or_else(|e| panic!("{args:?}: {e}: {o}"))
}

fn json(args: &[&str]) -> Value {
    json_code(args, 0)
}

/// Runs a `receive` or `peek` with `--json` and exit code `code`; returns its messages. Like
/// `aws sqs receive-message`: `{"Messages": [...]}`, and nothing at all when there are none.
fn received_code(args: &[&str], code: i32) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let (o, _) = expect(&a, code);
    if o.is_empty() {
        return Value::Array(vec![]);
    }
    let v: Value = serde_json::from_str(&o).unwrap_or_else(|e| panic!("{args:?}: {e}: {o}"));
    assert!(
        v.as_object().is_some_and(|m| m.len() == 1) && v["Messages"].is_array(),
        "{args:?}: {o}"
    );
    v["Messages"].clone()
}

fn received(args: &[&str]) -> Value {
    received_code(args, 0)
}

fn create(tag: &str, extra: &[&str]) -> Q {
    let q = Q::named(tag);
    let mut a = vec!["create", q.s()];
    a.extend_from_slice(SMALL);
    a.extend_from_slice(extra);
    expect(&a, 0);
    q
}

fn send(q: &Q, group: &str, dedup: &str, body: &str) -> Value {
    json(&["send", q.s(), "--group", group, "--dedup-id", dedup, body])
}

fn stat(q: &Q) -> Value {
    json(&["stat", q.s()])
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

fn text_u(v: &Value) -> u64 {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .parse()
        .unwrap()
}

/// The exit-code table of `--help` and of cli/README.md are the same rows.
#[test]
fn exit_codes_are_documented_alike_in_help_and_readme() {
    let (help, _) = expect(&["--help"], 0);
    let rows = |lines: Vec<(u8, String)>| {
        let mut v = lines;
        v.sort();
        v
    };
    let from_help = rows(
        help.lines()
            .skip_while(|l| !l.starts_with("Exit codes"))
            .skip(1)
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                Some((w.next()?.parse().ok()?, w.next()?.to_owned()))
            })
            .collect(),
    );
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let from_readme = rows(
        readme
            .lines()
            .skip_while(|l| !l.starts_with("## Exit codes"))
            .skip(1)
            .take_while(|l| !l.starts_with("## "))
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                if cells.len() < 4 {
                    return None;
                }
                Some((
                    cells[1].parse().ok()?,
                    cells[2].trim_matches('`').to_owned(),
                ))
            })
            .collect(),
    );
    assert!(from_help.len() >= 30, "{help}");
    assert_eq!(from_help, from_readme);
    assert!(from_help.contains(&(12, "LayoutVersionMismatch".into())));
}

#[test]
fn create_and_stat_report_every_setting() {
    let dlq = create("dlq", &[]);
    let q = create(
        "settings",
        &[
            "--visibility-timeout",
            "45s",
            "--delay-seconds",
            "2",
            "--message-retention-period",
            "12h",
            "--receive-message-wait-time",
            "500ms",
            "--content-based-deduplication",
            "--deduplication-scope",
            "messageGroup",
            "--deduplication-interval",
            "1m",
            "--max-in-flight",
            "7",
            "--max-participants",
            "8",
            "--release-on-death",
            "false",
            "--dead-letter-queue",
            dlq.s(),
            "--max-receive-count",
            "3",
        ],
    );
    let s = stat(&q);
    assert_eq!(s["queue"], q.s());
    assert_eq!(s["path"], q.path().display().to_string());
    let set = &s["settings"];
    assert_eq!(u(&set["visibility_timeout_ms"]), 45_000);
    assert_eq!(u(&set["delay_ms"]), 2_000);
    assert_eq!(u(&set["message_retention_period_ms"]), 43_200_000);
    assert_eq!(u(&set["receive_message_wait_time_ms"]), 500);
    assert_eq!(u(&set["maximum_message_size"]), 4096);
    assert_eq!(set["content_based_deduplication"], true);
    assert_eq!(set["deduplication_scope"], "messageGroup");
    assert_eq!(u(&set["deduplication_interval_ms"]), 60_000);
    assert_eq!(u(&set["dedup_entries"]), 256);
    assert_eq!(u(&set["max_in_flight"]), 7);
    // `--max-groups` sizes the base table; the table may grow past it (layout 16).
    assert_eq!(u(&set["group_capacity"]), 64);
    assert!(u(&set["max_groups"]) >= 64);
    assert_eq!(u(&set["max_participants"]), 8);
    assert_eq!(set["release_on_death"], false);
    assert_eq!(
        set["redrive_policy"]["dead_letter_queue"],
        dlq.path().display().to_string()
    );
    assert_eq!(u(&set["redrive_policy"]["max_receive_count"]), 3);
    assert_eq!(set["size_classes"][0]["payload_bytes"], 192);
    assert_eq!(set["size_classes"][0]["slots"], 64);
    let created = u(&set["created_timestamp"]);
    assert!(created <= now_ms() && created + 60_000 > now_ms());
    // A new queue: nothing in it, nobody else using it, nothing counted.
    for k in ["visible", "in_flight", "delayed", "sending", "deleted"] {
        assert_eq!(u(&s["messages"][k]), 0, "{k}");
    }
    assert_eq!(u(&s["groups"]["active"]), 0);
    assert_eq!(u(&s["participants"]["alive"]), 0);
    assert_eq!(u(&s["participants"]["dead"]), 0);
    assert_eq!(u(&s["dedup"]["in_use"]), 0);
    assert_eq!(u(&s["layout_version"]), shmfifo::LAYOUT_VERSION);
    let classes = s["size_classes"].as_array().unwrap();
    assert!(classes.len() >= 2);
    for c in classes {
        assert_eq!(c["slots"], c["free"]);
        assert_eq!(u(&c["bytes"]), u(&c["slot_bytes"]) * u(&c["slots"]));
    }
    assert!(s["counters"].as_object().unwrap().values().all(|v| v == 0));
    // The human form names the queue and its sections.
    let (text, _) = expect(&["stat", q.s()], 0);
    for part in [
        "Settings",
        "VisibilityTimeout              45s",
        "Groups: 0 active",
        "Participants: 0 alive, 0 dead",
        "Dedup table: 0 of 256",
        "Counters (since creation)",
    ] {
        assert!(text.contains(part), "{part:?} in\n{text}");
    }
    // create --json: the same settings.
    let other = Q::named("createjson");
    let c = json(&[
        "create",
        other.s(),
        "--max-messages",
        "16",
        "--mode",
        "0640",
    ]);
    assert_eq!(c["queue"], other.s());
    assert_eq!(c["path"], other.path().display().to_string());
    assert_eq!(u(&c["settings"]["visibility_timeout_ms"]), 30_000);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(other.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o640);
}

/// A send in one process, a receive in another, a delete in a third.
#[test]
fn send_receive_delete_across_processes() {
    let q = create("xproc", &[]);
    let before = now_ms();
    let sent = json(&[
        "send",
        q.s(),
        "-g",
        "customer-42",
        "-d",
        "order-1",
        "-a",
        "kind=String:order",
        "-a",
        "n=Number:42",
        "-a",
        "raw=Binary:AAEC",
        "order #1",
    ]);
    assert_eq!(sent["Duplicate"], false);
    let (ids, seq) = (sent["MessageId"].clone(), sent["SequenceNumber"].clone());
    assert_eq!(ids.as_str().unwrap().len(), 36);
    // The same dedup id again: a duplicate with the original's id and sequence number.
    let dup = send(&q, "customer-42", "order-1", "order #1 again");
    assert_eq!(dup["Duplicate"], true);
    assert_eq!(dup["MessageId"], ids);
    assert_eq!(dup["SequenceNumber"], seq);

    let got = received(&["receive", q.s(), "--max", "10"]);
    let msgs = got.as_array().unwrap();
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    assert_eq!(m["MessageId"], ids);
    assert_eq!(m["Body"], "order #1");
    let a = &m["Attributes"];
    assert_eq!(a["MessageGroupId"], "customer-42");
    assert_eq!(a["MessageDeduplicationId"], "order-1");
    assert_eq!(a["SequenceNumber"], seq);
    assert_eq!(a["ApproximateReceiveCount"], "1");
    let sent_at = text_u(&a["SentTimestamp"]);
    let first = text_u(&a["ApproximateFirstReceiveTimestamp"]);
    assert!(before <= sent_at + 1 && sent_at <= first && first <= now_ms() + 1);
    let ma = &m["MessageAttributes"];
    assert_eq!(ma["kind"]["DataType"], "String");
    assert_eq!(ma["kind"]["StringValue"], "order");
    assert_eq!(ma["n"]["DataType"], "Number");
    assert_eq!(ma["n"]["StringValue"], "42");
    assert_eq!(ma["raw"]["DataType"], "Binary");
    assert_eq!(ma["raw"]["BinaryValue"], "AAEC");
    let handle = m["ReceiptHandle"].as_str().unwrap().to_owned();
    assert!(handle.starts_with("sf2") && handle.len() == 42);
    // The receiving process exited cleanly: the message stays in flight, its receipt valid.
    let s = stat(&q);
    assert_eq!(u(&s["messages"]["in_flight"]), 1);
    let d = json(&["delete", q.s(), &handle]);
    assert_eq!(d["Successful"][0]["ReceiptHandle"], handle.as_str());
    assert_eq!(d["Failed"].as_array().unwrap().len(), 0);
    let s = stat(&q);
    assert_eq!(u(&s["messages"]["in_flight"]), 0);
    assert_eq!(u(&s["counters"]["deleted"]), 1);
    // Deleted: the handle is stale now.
    let (_, err) = expect(&["delete", q.s(), &handle], 24);
    assert!(err.contains(&format!("shmfifo: {}: ", q.s())), "{err}");
    assert!(err.contains("hint:"), "{err}");

    // Bodies from a file and from stdin, exactly.
    let file = std::env::temp_dir().join(format!("shmfifo-cli-body-{}", std::process::id()));
    std::fs::write(&file, "line 1\nline 2\n").unwrap();
    send_file(&q, &file);
    std::fs::remove_file(&file).unwrap();
    cmd(&["send", q.s(), "-g", "g2", "-d", "stdin-1", "-"])
        .write_stdin("from stdin\n")
        .assert()
        .code(0);
    let got = received(&["receive", q.s(), "-n", "10", "--delete"]);
    let bodies: Vec<&str> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies.len(), 2);
    assert!(bodies.contains(&"line 1\nline 2\n"));
    assert!(bodies.contains(&"from stdin\n"));
    // --delete deleted them.
    assert_eq!(u(&stat(&q)["counters"]["deleted"]), 3);
    // The human form: every system attribute, the body last.
    send(&q, "g3", "h-1", "human");
    let (text, _) = expect(&["receive", q.s()], 0);
    for k in [
        "MessageId",
        "ReceiptHandle",
        "MessageGroupId",
        "MessageDeduplicationId",
        "SequenceNumber",
        "SentTimestamp",
        "ApproximateFirstReceiveTimestamp",
        "ApproximateReceiveCount           1",
    ] {
        assert!(text.contains(k), "{k} in\n{text}");
    }
    assert!(text
        .trim_end()
        .ends_with("Body                              human"));
}

fn send_file(q: &Q, file: &Path) {
    let f = file.display().to_string();
    let r = json(&["send", q.s(), "-g", "g1", "-d", "file-1", "--file", &f]);
    assert_eq!(r["Duplicate"], false);
}

#[test]
fn empty_receive_exits_0_and_prints_nothing_as_aws_does_peek_exits_1() {
    let q = create("empty", &[]);
    assert_eq!(
        received(&["receive", q.s()]),
        Value::Array(vec![]),
        "nothing printed, exit 0"
    );
    assert_eq!(received_code(&["peek", q.s()], 1), Value::Array(vec![]));
    let (o, e) = expect(&["receive", q.s(), "--wait", "50ms"], 0);
    assert_eq!(o, "");
    assert!(e.contains("no messages"));
}

/// Peek returns what a receive would, and changes nothing: counts, groups, dedup fill and
/// counters are the same before and after, and a later receive is the first.
#[test]
fn peek_changes_nothing() {
    let q = create("peek", &[]);
    send(&q, "a", "1", "a1");
    send(&q, "a", "2", "a2");
    send(&q, "b", "3", "b1");
    // One in flight, so group b is locked (peek shows group a's visible prefix only).
    let b = received(&["receive", q.s(), "-n", "1"]);
    let _ = b;
    let before = stat(&q);
    let peeked = received(&["peek", q.s(), "--max", "10"]);
    let again = received(&["peek", q.s(), "--max", "10"]);
    let after = stat(&q);
    for k in ["messages", "groups", "dedup", "counters", "size_classes"] {
        assert_eq!(before[k], after[k], "{k} changed");
    }
    assert_eq!(peeked, again);
    let p = peeked.as_array().unwrap();
    let in_flight_group = if b[0]["Attributes"]["MessageGroupId"] == "a" {
        "a"
    } else {
        "b"
    };
    let expect_bodies: Vec<&str> = if in_flight_group == "a" {
        vec!["b1"]
    } else {
        vec!["a1", "a2"]
    };
    let bodies: Vec<&str> = p.iter().map(|m| m["Body"].as_str().unwrap()).collect();
    assert_eq!(bodies, expect_bodies);
    for m in p {
        assert!(m.get("ReceiptHandle").is_none());
        assert_eq!(m["Attributes"]["ApproximateReceiveCount"], "0");
        assert!(m["Attributes"]
            .get("ApproximateFirstReceiveTimestamp")
            .is_none());
    }
    // --max limits.
    if expect_bodies.len() == 2 {
        assert_eq!(
            received(&["peek", q.s(), "-n", "1"])
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }
    // The peeked messages are received for the first time.
    let got = received(&["receive", q.s(), "-n", "10"]);
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), expect_bodies.len());
    for (m, pm) in got.iter().zip(p) {
        assert_eq!(m["MessageId"], pm["MessageId"]);
        assert_eq!(m["Attributes"]["ApproximateReceiveCount"], "1");
    }
}

#[test]
fn batch_of_json_lines_is_sent_ten_at_a_time() {
    let q = create("batch", &[]);
    let mut lines = String::new();
    for i in 0..23 {
        lines.push_str(&format!(
            "{{\"group\":\"g{}\",\"body\":\"m{i}\",\"dedup_id\":\"d{i}\",\"attributes\":{{\"i\":{i},\"s\":\"x\"}}}}\n",
            i % 3
        ));
        if i == 5 {
            lines.push('\n');
        }
    }
    // A duplicate of line 1.
    lines.push_str("{\"group\":\"g0\",\"body\":\"m0\",\"dedup_id\":\"d0\"}\n");
    let file = std::env::temp_dir().join(format!("shmfifo-cli-batch-{}", std::process::id()));
    std::fs::write(&file, &lines).unwrap();
    let r = json(&["send", q.s(), "--batch", &file.display().to_string()]);
    std::fs::remove_file(&file).unwrap();
    let ok = r["Successful"].as_array().unwrap();
    assert_eq!(ok.len(), 24);
    assert!(r["Failed"].as_array().unwrap().is_empty());
    assert_eq!(u(&r["Unsent"]), 0);
    // Ids are line numbers (the blank line 7 skipped); the last is a duplicate of line 1.
    assert_eq!(ok[0]["Id"], "1");
    assert_eq!(ok[6]["Id"], "8");
    assert_eq!(ok[23]["Duplicate"], true);
    assert_eq!(ok[23]["MessageId"], ok[0]["MessageId"]);
    let s = stat(&q);
    assert_eq!(u(&s["messages"]["visible"]), 23);
    assert_eq!(u(&s["counters"]["sent"]), 23);
    assert_eq!(u(&s["counters"]["duplicates"]), 1);
    assert_eq!(u(&s["groups"]["active"]), 3);
    // Each batch's messages to one group went as one pack (layout 23): fewer slots in use
    // than messages, which the text says.
    let used: u64 = s["size_classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| u(&c["used"]))
        .sum();
    assert!(used < 23, "{used} slots for 23 messages");
    let (text, _) = expect(&["stat", q.s()], 0);
    assert!(
        text.contains(&format!("USED counts slots: 23 messages in {used} ")),
        "{text}"
    );
    // The largest groups, with ids: g0 and g1 have 8 messages, g2 7.
    let largest = s["groups"]["largest"].as_array().unwrap();
    assert_eq!(largest.len(), 3);
    assert_eq!(u(&largest[0]["backlog"]), 8);
    assert_eq!(u(&largest[2]["backlog"]), 7);
    assert_eq!(largest[2]["group_id"], "g2");
    let s1 = json(&["stat", q.s(), "--top", "1"]);
    assert_eq!(s1["groups"]["largest"].as_array().unwrap().len(), 1);
    // Group order and attributes survive.
    let got = received(&["peek", q.s(), "-n", "100"]);
    let g1: Vec<&str> = got
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["Attributes"]["MessageGroupId"] == "g1")
        .map(|m| m["Body"].as_str().unwrap())
        .collect();
    assert_eq!(g1, ["m1", "m4", "m7", "m10", "m13", "m16", "m19", "m22"]);
    let m = &got.as_array().unwrap()[0];
    assert_eq!(m["MessageAttributes"]["s"]["StringValue"], "x");
    assert_eq!(m["MessageAttributes"]["i"]["DataType"], "Number");

    // A malformed line: nothing is sent, exit code 3, the line is named.
    let (_, err) = {
        let out = cmd(&["send", q.s(), "--batch", "-"])
            .write_stdin("{\"group\":\"g\",\"body\":\"ok\",\"dedup_id\":\"z1\"}\n{\"group\":\"g\",\"body\":\n")
            .assert()
            .code(3);
        let o = out.get_output();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert!(err.starts_with("shmfifo: stdin line 2: "), "{err}");
    assert_eq!(u(&stat(&q)["counters"]["sent"]), 23);
    // A line without a group: its batch fails as a request with the code SQS gives a batch
    // (S12: InvalidParameterValue, where a single send says MissingParameter); each of its
    // entries is in Failed under its id.
    let a = cmd(&["send", q.s(), "--batch", "-", "--json"])
        .write_stdin("{\"group\":\"g\",\"body\":\"ok\",\"dedup_id\":\"z3\"}\n{\"body\":\"no group\",\"dedup_id\":\"z2\"}\n")
        .assert()
        .code(20);
    let v: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    let failed = v["Failed"].as_array().unwrap();
    assert_eq!(failed.len(), 2, "{v}");
    assert_eq!(failed[1]["Id"], "2");
    assert_eq!(failed[1]["Code"], "InvalidParameterValue");
    assert_eq!(failed[1]["Kind"], "InvalidParameterValue");
    assert_eq!(failed[1]["SenderFault"], true);
    assert_eq!(u(&v["Unsent"]), 0);
    // Without --json, the request's error and its hint: a group is missing.
    let a = cmd(&["send", q.s(), "--batch", "-"])
        .write_stdin("{\"body\":\"no group\",\"dedup_id\":\"z5\"}\n")
        .assert()
        .code(20);
    let e = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(e.contains("hint: every message needs a group"), "{e}");
    let single = cmd(&["send", q.s(), "-d", "z4", "body", "--json"])
        .assert()
        .code(21);
    let e: Value = serde_json::from_slice(&single.get_output().stderr).unwrap();
    assert_eq!(
        e["Error"]["Code"], "MissingParameter",
        "a single send's answer (S1), which SQS gives differently from a batch's (S12)"
    );
    assert_eq!(u(&stat(&q)["counters"]["sent"]), 23);
}

#[test]
fn errors_have_exit_codes_names_and_hints() {
    let missing = Q::named("missing");
    let (_, e) = expect(&["stat", missing.s()], 10);
    assert!(
        e.starts_with(&format!(
            "shmfifo: {}: no queue at /dev/shm/{}\n",
            missing.s(),
            missing.s()
        )),
        "{e}"
    );
    assert!(e.contains(&format!(
        "hint: create it with `shmfifo create {}`",
        missing.s()
    )));
    assert!(e.contains("`shmfifo ls`"));
    expect(&["receive", missing.s()], 10);
    // With --json the error is JSON on stderr, as aws sqs prints it, with SQS's code; the exit
    // code is the same.
    let (o, e) = expect(&["receive", missing.s(), "--json"], 10);
    assert_eq!(o, "");
    let err: Value = serde_json::from_str(&e).unwrap_or_else(|x| panic!("{x}: {e}"));
    assert_eq!(
        err["Error"]["Code"], "AWS.SimpleQueueService.NonExistentQueue",
        "{e}"
    );
    assert!(err["Error"]["Message"]
        .as_str()
        .unwrap()
        .contains(missing.s()));
    assert!(err["Error"]["Hint"]
        .as_str()
        .unwrap()
        .contains("shmfifo create"));
    expect(&["unlink", missing.s()], 10);

    let q = create("errors", &[]);
    // Exists already, with other settings: QueueAlreadyExists (exit 11) naming each difference.
    let (_, e) = expect(&["create", q.s()], 11);
    assert!(e.contains("exists with other settings"), "{e}");
    // A derived setting says which option it comes from.
    assert!(
        e.contains("dedup_entries is 256 (asked 16384: --dedup-entries rounded up"),
        "{e}"
    );
    assert!(e.contains("hint:") && e.contains("shmfifo unlink"), "{e}");
    let (_, e) = expect(
        &["create", q.s(), "--visibility-timeout", "7s", "--json"],
        11,
    );
    let err: Value = serde_json::from_str(&e).unwrap_or_else(|x| panic!("{x}: {e}"));
    assert_eq!(err["Error"]["Code"], "QueueAlreadyExists");
    assert!(err["Error"]["Differences"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.as_str().unwrap().starts_with("visibility_timeout_ms")));
    // With the same settings, as SQS's CreateQueue: success, and it says so.
    let mut again = vec!["create", q.s()];
    again.extend_from_slice(SMALL);
    let (o, _) = expect(&again, 0);
    assert!(o.starts_with("exists with these settings:"), "{o}");
    again.push("--json");
    let (o, _) = expect(&again, 0);
    let v: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(v["existed"], true);
    // Settings that were not compared (the file's mode, what a full dedup table does, the
    // attempt records, the base group table) said "exists with these settings" and changed
    // nothing: each is a difference now.
    for (extra, named) in [
        (&["--mode", "0666"][..], "mode is \"0600\" (asked \"0666\")"),
        (&["--dedup-overflow", "refuse"][..], "dedup_overflow is"),
        (&["--attempt-entries", "0"][..], "attempt_entries is"),
        (&["--max-groups", "8"][..], "(asked 16: twice --max-groups"),
    ] {
        let mut a = vec!["create", q.s()];
        // SMALL with the extra option in place of its own.
        let mut small = SMALL.chunks(2).filter(|kv| kv[0] != extra[0]).flatten();
        a.extend(&mut small);
        a.extend_from_slice(extra);
        let (_, e) = expect(&a, 11);
        assert!(e.contains(named), "{extra:?}: {e}");
    }
    // Not input errors (exit 3, for a malformed file or line): a directory that is not there
    // is 10, as for create; a server's address it refuses is a usage error (2).
    let (_, e) = expect(&["ls", "--dir", "/no/such/dir"], 10);
    assert!(e.contains("mkdir -p /no/such/dir"), "{e}");
    expect(&["metrics", "--listen", "0.0.0.0:9", "x"], 2);
    // `peek --max 0` read nothing and exited 1 ("no messages"): a usage error now.
    expect(&["peek", q.s(), "--max", "0"], 2);
    // Usage errors (clap): unknown option, malformed duration, missing argument.
    expect(&["stat", q.s(), "--bogus"], 2);
    expect(&["receive", q.s(), "--wait", "5 parsecs"], 2);
    expect(&["delete", q.s()], 2);
    expect(&["create", "x", "--dead-letter-queue", "dlq"], 2);
    expect(
        &["create", "x", "--redrive-policy", "{\"maxReceiveCount\":5}"],
        2,
    );
    // Invalid messages: no group, no dedup id, characters SQS refuses.
    let (_, e) = expect(&["send", q.s(), "body"], 21);
    assert!(
        e.contains("MessageGroupId") && e.contains("hint: pass the message group with --group")
    );
    let (_, e) = expect(&["send", q.s(), "-g", "g", "body"], 20);
    assert!(e.contains("--content-based-deduplication"), "{e}");
    expect(&["send", q.s(), "-g", "g", "-d", "x", "bad \u{1} char"], 22);
    expect(
        &["send", q.s(), "-g", "g", "-d", "x", "-a", "x=Float:1", "b"],
        2,
    );
    expect(&["send", q.s(), "-g", "g", "-d", "x"], 2);
    expect(
        &[
            "send",
            q.s(),
            "-g",
            "g",
            "-d",
            "x",
            "--file",
            "/nonexistent/file",
        ],
        3,
    );
    // Wrong values the library rejects.
    expect(&["receive", q.s(), "-n", "11"], 20);
    expect(&["receive", q.s(), "--visibility-timeout", "13h"], 20);
    expect(&["create", "bad name!"], 18);
    let big = Q::named("big");
    expect(&["create", big.s(), "--visibility-timeout", "13h"], 19);
    expect(&["set", q.s(), "DeduplicationScope", "messageGroup"], 37);
    expect(&["set", q.s(), "MaximumMessageSize", "99999999"], 19);
    expect(
        &["set", q.s(), "MaximumMessageSize", "99999999999999999999"],
        19,
    );
    // `.` and `..` are no queue names, for looking as for opening.
    expect(&["stat", ".."], 18);
    expect(&["create", ".."], 18);
    // The services print no JSON document: --json refused, not ignored.
    let (_, e) = expect(&["--json", "metrics", "--dir", "/nonexistent"], 2);
    assert!(e.contains("prints no JSON document"), "{e}");
    expect(&["watch", q.s(), "--count", "0"], 2);
    // A setting out of range at create is InvalidConfig (19), as --max-groups 0 (it was a
    // usage error here, 2).
    expect(&["create", big.s(), "--max-messages", "0"], 19);
    expect(&["create", big.s(), "--max-groups", "0"], 19);
    // A hint names the queue that is missing: a redrive's target, a directory.
    let (_, e) = expect(&["create", "/nonexistent-dir/q"], 10);
    assert!(e.contains("mkdir -p /nonexistent-dir"), "{e}");
    let (_, e) = expect(&["send", q.s(), "-g", "g h", "-d", "x", "body"], 20);
    assert!(e.contains("1 to 128 characters"), "{e}");
    // An empty body is not told about sizes.
    let (_, e) = expect(&["send", q.s(), "-g", "g", "-d", "y", ""], 20);
    assert!(!e.contains("MaximumMessageSize"), "{e}");
    expect(&["set", q.s(), "Bogus", "1"], 36);
    let (_, e) = expect(&["delete", q.s(), "garbage"], 23);
    assert!(e.contains("hint: use a ReceiptHandle"), "{e}");
    let dlq = Q::named("nodlq");
    expect(
        &[
            "create",
            big.s(),
            "--dead-letter-queue",
            dlq.s(),
            "--max-receive-count",
            "2",
        ],
        38,
    );
    expect(&["stat", big.s()], 10);
    // Larger than any /dev/shm (about 2.3 TiB: a queue that may grow lays its base file out
    // for messages up to 256 KiB, whatever its MaximumMessageSize): tmpfs refuses the
    // reservation at once, and nothing is left behind.
    let (_, e) = expect(
        &[
            "create",
            big.s(),
            "--max-messages",
            "1600000000",
            "--maximum-message-size",
            "1MiB",
        ],
        17,
    );
    assert!(
        e.contains(
            "hint: the queue needs 2.3 TiB more and /dev/shm is too small: check `df -h /dev/shm`"
        ),
        "{e}"
    );
    assert!(!big.path().exists());

    // Another layout version: patch the header's version word (byte 8), in a directory of
    // its own so that `ls` opens nobody else's queues.
    let dir = Dir::new("layoutdir");
    let lm = Q::at(&dir.0.join("old"));
    let mut args = vec!["create", lm.s()];
    args.extend_from_slice(SMALL);
    expect(&args, 0);
    let (v, old) = (shmfifo::LAYOUT_VERSION, shmfifo::LAYOUT_VERSION - 1);
    let mut bytes = std::fs::read(lm.path()).unwrap();
    assert_eq!(u64::from(bytes[8]), v);
    bytes[8] = old as u8;
    std::fs::write(lm.path(), &bytes).unwrap();
    drop(bytes);
    let (_, e) = expect(&["stat", lm.s()], 12);
    assert!(e.starts_with(&format!("shmfifo: {}: ", lm.s())), "{e}");
    assert!(
        e.contains(&format!(
            "hint: the queue was made by another shmfifo version (layout {old}; this shmfifo speaks layout {v})"
        )),
        "{e}"
    );
    assert!(e.contains(&format!("`shmfifo unlink {}`", lm.s())), "{e}");
    expect(&["send", lm.s(), "-g", "g", "-d", "1", "x"], 12);
    // `ls` lists it with its layout.
    let (list, _) = expect(&["ls", "--dir", &dir.0.display().to_string()], 0);
    let line = list.lines().find(|l| l.starts_with(lm.s())).unwrap();
    assert!(
        line.ends_with(&format!("layout {old} (this shmfifo speaks {v})")),
        "{line}"
    );
    let l = json(&["ls", "--dir", &dir.0.display().to_string()]);
    assert_eq!(l[0]["status"], "error");
    assert_eq!(l[0]["error"]["kind"], "LayoutVersionMismatch");
    assert_eq!(l[0]["error"]["exit_code"], 12);
    // unlink removes a queue of another layout...
    expect(&["unlink", lm.s()], 0);
    assert!(!lm.path().exists());
    // ...but never a file that is not a queue.
    let not = Q::named("notaqueue");
    std::fs::write(not.path(), b"hello, not a queue").unwrap();
    let (_, e) = expect(&["unlink", not.s()], 13);
    assert!(e.contains("is not a shmfifo queue"), "{e}");
    assert!(not.path().exists());
    expect(&["peek", not.s()], 13);
}

/// `send --wait` on a full size class waits for room: it fails with SizeClassFull
/// (exit 30) when the time passes, and goes through when a consumer in another process
/// deletes a message; with --batch the lines are sent in order, each waiting.
#[test]
fn send_wait_applies_backpressure_on_a_full_class() {
    let q = Q::named("wait");
    expect(
        &["create", q.s(), "--max-messages", "4", "--size-limit", "0"],
        0,
    );
    for g in ["a", "b", "c", "d"] {
        send(&q, g, g, "x");
    }
    let full = ["send", q.s(), "-g", "e", "-d", "e", "--wait", "100ms", "x"];
    let (_, err) = expect(&full, 30);
    assert!(
        err.contains("no free slot") && err.contains("--wait"),
        "{err}"
    );
    let waiting = std::process::Command::new(BIN)
        .args([
            "send",
            q.s(),
            "-g",
            "e",
            "-d",
            "e",
            "--wait",
            "30s",
            "x",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let got = received(&["receive", q.s(), "--max", "1", "--delete"]);
    assert_eq!(got.as_array().unwrap().len(), 1);
    let out = waiting.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "the waiting send went through");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["MessageId"].is_string(), "{v}");
    // A batch with --wait: one line fits at once, the next waits for a delete.
    let lines = "{\"group\": \"f\", \"dedup_id\": \"f\", \"body\": \"1\"}\n\
                 {\"group\": \"h\", \"dedup_id\": \"h\", \"body\": \"2\"}\n";
    received(&["receive", q.s(), "--max", "1", "--delete"]);
    let mut batch = std::process::Command::new(BIN)
        .args(["send", q.s(), "--batch", "-", "--wait", "30s", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        batch
            .stdin
            .take()
            .unwrap()
            .write_all(lines.as_bytes())
            .unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    received(&["receive", q.s(), "--max", "1", "--delete"]);
    let out = batch.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["Successful"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        u(&stat(&q)["messages"]["visible"]),
        4,
        "full again, nothing lost"
    );
}

#[test]
fn change_visibility_then_receive_again() {
    let q = create("cmv", &[]);
    send(&q, "g", "1", "m");
    let m = received(&["receive", q.s(), "--visibility-timeout", "1h"]);
    let h1 = m[0]["ReceiptHandle"].as_str().unwrap().to_owned();
    assert_eq!(received(&["receive", q.s()]), Value::Array(vec![]));
    let r = json(&["change-visibility", q.s(), &h1, "0"]);
    assert_eq!(r["ReceiptHandle"], h1.as_str());
    assert_eq!(u(&r["VisibilityTimeoutMs"]), 0);
    let p = received(&["peek", q.s()]);
    assert_eq!(p[0]["Attributes"]["ApproximateReceiveCount"], "1");
    let m2 = received(&["receive", q.s()]);
    assert_eq!(m2[0]["Attributes"]["ApproximateReceiveCount"], "2");
    assert_eq!(m2[0]["MessageId"], m[0]["MessageId"]);
    let h2 = m2[0]["ReceiptHandle"].as_str().unwrap().to_owned();
    // The first handle is superseded.
    expect(&["change-visibility", q.s(), &h1, "10s"], 24);
    let (o, _) = expect(&["change-visibility", q.s(), &h2, "10s"], 0);
    assert_eq!(o, format!("{h2} visible again in 10s\n"));
    expect(&["change-visibility", q.s(), &h2, "13h"], 20);
    // Two handles, one stale: the good one is deleted, the exit code is the stale one's.
    let d = json_code(&["delete", q.s(), &h1, &h2], 24);
    assert_eq!(d["Successful"][0]["ReceiptHandle"], h2.as_str());
    assert_eq!(d["Failed"][0]["ReceiptHandle"], h1.as_str());
    assert_eq!(d["Failed"][0]["ExitCode"], 24);
    assert_eq!(d["Failed"][0]["Code"], "InvalidParameterValue");
    assert_eq!(u(&stat(&q)["counters"]["deleted"]), 1);
}

/// Every sample line is `name{queue="..."[,label="..."]} value`, after its family's HELP
/// and TYPE lines.
#[test]
fn stat_prometheus_is_the_text_exposition_format() {
    let q = create("prom", &[]);
    send(&q, "g", "1", "x");
    send(&q, "g", "2", "y");
    received(&["receive", q.s()]);
    let (text, _) = expect(&["stat", q.s(), "--prometheus"], 0);
    let mut help = std::collections::HashSet::new();
    let mut typed = std::collections::HashMap::new();
    let mut samples = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, h) = rest.split_once(' ').unwrap();
            assert!(!h.is_empty());
            assert!(help.insert(name.to_owned()), "HELP {name} twice");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, t) = rest.split_once(' ').unwrap();
            assert!(help.contains(name), "TYPE before HELP: {name}");
            assert!(t == "counter" || t == "gauge", "{line}");
            typed.insert(name.to_owned(), t.to_owned());
        } else {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = series.split_once('{').unwrap();
            let labels = labels.strip_suffix('}').unwrap();
            assert!(typed.contains_key(name), "sample before TYPE: {line}");
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()),
                "{name}"
            );
            assert!(
                labels.starts_with(&format!("queue=\"{}\"", q.s())),
                "{line}"
            );
            let v: f64 = value.parse().unwrap();
            if labels == format!("queue=\"{}\"", q.s()) {
                samples.insert(name.to_owned(), v);
            }
        }
    }
    assert_eq!(typed["shmfifo_sent_total"], "counter");
    assert_eq!(typed["shmfifo_messages_visible"], "gauge");
    assert_eq!(samples["shmfifo_sent_total"], 2.0);
    assert_eq!(samples["shmfifo_received_total"], 1.0);
    assert_eq!(samples["shmfifo_messages_visible"], 1.0);
    assert_eq!(samples["shmfifo_messages_in_flight"], 1.0);
    assert_eq!(samples["shmfifo_groups_locked"], 1.0);
    assert_eq!(samples["shmfifo_dedup_entries"], 256.0);
    // 13 lifetime counters (empty receives the latest), the dedup evictions, the growths and
    // those refused, and the two quarantine counts, each a counter family.
    assert_eq!(typed.values().filter(|t| *t == "counter").count(), 18);
    assert_eq!(samples["shmfifo_grows_total"], 0.0);
    assert_eq!(samples["shmfifo_refused_grows_total"], 0.0);
    assert!(samples["shmfifo_size_limit_bytes"] >= samples["shmfifo_arena_bytes"]);
    assert_eq!(samples["shmfifo_dedup_evictions_total"], 0.0);
    assert_eq!(samples["shmfifo_quarantined_messages_total"], 0.0);
    assert_eq!(samples["shmfifo_quarantined_groups_total"], 0.0);
    assert_eq!(
        samples["shmfifo_dedup_effective_interval_ms"], 300_000.0,
        "nothing evicted: SQS's 5 minutes"
    );
    assert!(text.contains("shmfifo_slots{queue="));
    expect(&["stat", q.s(), "--prometheus", "--json"], 2);
}

#[test]
fn watch_refreshes_count_times() {
    let q = create("watch", &[]);
    send(&q, "g", "1", "x");
    let (o, _) = expect(
        &[
            "watch",
            q.s(),
            "--count",
            "2",
            "--interval",
            "50ms",
            "--json",
        ],
        0,
    );
    let lines: Vec<Value> = o
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0]["rates"].is_null());
    assert_eq!(lines[1]["rates"]["sent"], 0.0);
    for l in &lines {
        assert_eq!(l["queue"], q.s());
        assert_eq!(u(&l["messages"]["visible"]), 1);
        assert_eq!(u(&l["counters"]["sent"]), 1);
        assert_eq!(u(&l["active_groups"]), 1);
    }
    assert!(u(&lines[1]["timestamp"]) >= u(&lines[0]["timestamp"]) + 50);
    let (o, _) = expect(&["watch", q.s(), "-c", "2", "-i", "10ms"], 0);
    assert_eq!(o.matches("COUNTER").count(), 2, "{o}");
    assert!(o.contains("visible               1"), "{o}");
    expect(&["watch", q.s(), "-i", "0"], 2);
}

#[test]
fn ls_lists_queues_with_counts() {
    let dir = Dir::new("lsdir");
    let (o, e) = expect(&["ls", "--dir", &dir.0.display().to_string()], 0);
    assert_eq!(o, "");
    assert!(e.contains("no shmfifo queues"));
    let a = Q::at(&dir.0.join("a"));
    let b = Q::at(&dir.0.join("b"));
    for q in [&a, &b] {
        let mut args = vec!["create", q.s()];
        args.extend_from_slice(SMALL);
        expect(&args, 0);
    }
    send(&a, "g1", "1", "x");
    send(&a, "g2", "2", "y");
    std::fs::write(dir.0.join("c-not-a-queue"), b"text").unwrap();
    let d = dir.0.display().to_string();
    let list = json(&["ls", "--dir", &d]);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["queue"], a.s());
    assert_eq!(list[0]["status"], "ok");
    assert_eq!(u(&list[0]["visible"]), 2);
    assert_eq!(u(&list[0]["active_groups"]), 2);
    assert_eq!(u(&list[1]["visible"]), 0);
    let all = json(&["ls", "--dir", &d, "--all"]);
    assert_eq!(all.as_array().unwrap().len(), 3);
    assert_eq!(all[2]["status"], "not_a_queue");
    let (text, _) = expect(&["ls", "--dir", &d], 0);
    let line = text.lines().find(|l| l.starts_with(a.s())).unwrap();
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&cols[1..5], ["2", "0", "0", "2"], "{line}");
    // The default directory is /dev/shm (not listed here: that would open every queue of
    // every test running beside this one).
    let (help, _) = expect(&["ls", "--help"], 0);
    assert!(help.contains("[default: /dev/shm]"), "{help}");
    // No such directory: QueueDoesNotExist's "no directory" (10), as for create.
    expect(&["ls", "--dir", "/nonexistent-dir"], 10);
}

/// Makes the messages `got` (a `receive --json` answer of `src`, a queue with
/// maxReceiveCount 1) visible again, and receives: that receive moves them to the dead-letter
/// queue instead of returning them.
fn dead_letter_again(src: &Q, got: &Value) {
    for m in got.as_array().unwrap() {
        json(&[
            "change-visibility",
            src.s(),
            m["ReceiptHandle"].as_str().unwrap(),
            "0",
        ]);
    }
    assert_eq!(
        received(&["receive", src.s(), "-n", "10"]),
        Value::Array(vec![])
    );
}

#[test]
fn redrive_moves_dead_letters_back() {
    let dlq = create("rdlq", &[]);
    let src = create(
        "rsrc",
        &[
            "--redrive-policy",
            &format!(
                "{{\"deadLetterTargetArn\":\"{}\",\"maxReceiveCount\":1}}",
                dlq.s()
            ),
        ],
    );
    for i in 0..4 {
        send(&src, &format!("g{i}"), &i.to_string(), &format!("m{i}"));
    }
    // Received once, made visible again: the next receive moves them (maxReceiveCount 1).
    let got = received(&["receive", src.s(), "-n", "10"]);
    dead_letter_again(&src, &got);
    let d = stat(&dlq);
    assert_eq!(u(&d["messages"]["visible"]), 4);
    assert_eq!(u(&stat(&src)["counters"]["moved_to_dead_letter"]), 4);
    let p = received(&["peek", dlq.s()]);
    assert_eq!(
        p[0]["Attributes"]["DeadLetterQueueSourceArn"],
        src.path().display().to_string()
    );
    // One to another queue, rate-limited; the rest back to their source.
    let other = create("rother", &[]);
    let r = json(&[
        "redrive",
        dlq.s(),
        "--to",
        other.s(),
        "--limit",
        "1",
        "--rate",
        "50/s",
    ]);
    assert_eq!(u(&r["moved"]), 1);
    assert_eq!(u(&r["skipped"]), 0);
    assert_eq!(u(&stat(&other)["messages"]["visible"]), 1);
    let started = std::time::Instant::now();
    let r = json(&["redrive", dlq.s(), "--rate", "40"]);
    assert_eq!(u(&r["moved"]), 3);
    // Three messages at 40/s: the third is due 50 ms after the first.
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(u(&stat(&dlq)["messages"]["visible"]), 0);
    let s = stat(&src);
    assert_eq!(u(&s["messages"]["visible"]), 3);
    let got = received(&["receive", src.s(), "-n", "10"]);
    for m in got.as_array().unwrap() {
        // New messages: received once.
        assert_eq!(m["Attributes"]["ApproximateReceiveCount"], "1");
    }
    // Nothing left: moved 0, still success.
    let back = got;
    let (o, e) = expect(&["redrive", dlq.s()], 0);
    assert!(o.starts_with("moved 0 messages"), "{o}");
    // stderr is not a terminal here: no progress bar, no control characters in a log.
    assert!(!e.contains('\r') && !e.contains('\x1b'), "{e:?}");
    // Messages naming no source, among others, at a slow rate: each counted skipped once
    // (the run went in chunks of a message each, and every chunk took the skipped ones
    // again), and visible again at once afterwards.
    for (g, d) in [("n1", "x1"), ("n2", "x2")] {
        json(&["send", dlq.s(), "-g", g, "-d", d, "no source"]);
    }
    // Three more dead letters of `src` behind them: the three received above (once, as new
    // messages) made visible again, and moved by the next receive.
    dead_letter_again(&src, &back);
    let r = json(&["redrive", dlq.s(), "--rate", "8"]);
    assert_eq!((u(&r["moved"]), u(&r["skipped"])), (3, 2), "{r}");
    assert_eq!(u(&stat(&dlq)["messages"]["visible"]), 2);
}

/// Counters after a known workload of separate CLI processes.
#[test]
fn counters_count_a_known_cli_workload() {
    let q = create("counters", &["--max-in-flight", "2"]);
    send(&q, "a", "1", "a1");
    send(&q, "a", "2", "a2");
    send(&q, "b", "3", "b1");
    send(&q, "a", "1", "a1 again"); // duplicate
                                    // The in-flight limit (2) cuts this receive short: a1 and a2.
    let got = received(&["receive", q.s(), "-n", "10"]);
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 2);
    for m in got {
        json(&["delete", q.s(), m["ReceiptHandle"].as_str().unwrap()]);
    }
    let b = received(&["receive", q.s()]);
    json(&[
        "change-visibility",
        q.s(),
        b[0]["ReceiptHandle"].as_str().unwrap(),
        "0",
    ]);
    let b = received(&["receive", q.s()]);
    assert_eq!(b[0]["Attributes"]["ApproximateReceiveCount"], "2");
    json(&["delete", q.s(), b[0]["ReceiptHandle"].as_str().unwrap()]);
    let c = &stat(&q)["counters"];
    let expected = [
        ("sent", 3),
        ("duplicates", 1),
        ("received", 4),
        ("deleted", 3),
        ("visibility_expiries", 1),
        ("moved_to_dead_letter", 0),
        ("retention_expiries", 0),
        ("in_flight_limit_hits", 1),
        ("waits", 0),
        ("wake_ups", 0),
        ("contention_retries", 0),
        ("participants_recovered", 0),
        ("empty_receives", 0),
    ];
    assert_eq!(c.as_object().unwrap().len(), expected.len());
    for (k, v) in expected {
        assert_eq!(u(&c[k]), v, "{k}: {c}");
    }
}

/// A process with the queue open shows as a live participant with its pid; recover, set,
/// purge and unlink.
#[test]
fn participants_recover_set_purge_unlink() {
    let q = create("admin", &[]);
    // A long-polling receive holds the queue open (`watch` only observes: it registers
    // nothing).
    let mut child: Child = std::process::Command::new(BIN)
        .args(["receive", q.s(), "--wait", "20"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it has registered.
    let mut seen = false;
    for _ in 0..500 {
        let s = stat(&q);
        if u(&s["participants"]["alive"]) == 1 {
            assert_eq!(
                u(&s["participants"]["list"][0]["pid"]),
                u64::from(child.id())
            );
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(seen, "the receiver never showed up");
    let r = json(&["recover", q.s()]);
    for k in ["dead_participants", "published", "freed", "released"] {
        assert!(r[k].is_u64(), "{k}: {r}");
    }
    // The killed receiver, repaired by the open `recover` makes before its own pass: counted
    // (it said 0 right after `stat` showed it dead).
    assert_eq!(u(&r["dead_participants"]), 1, "{r}");
    let s = stat(&q);
    assert_eq!(u(&s["participants"]["alive"]), 0);
    assert_eq!(u(&s["participants"]["dead"]), 0);
    let (o, _) = expect(&["recover", q.s()], 0);
    assert!(o.contains("dead participants repaired"), "{o}");

    let r = json(&["set", q.s(), "VisibilityTimeout", "60"]);
    assert_eq!(r["attribute"], "VisibilityTimeout");
    assert_eq!(u(&stat(&q)["settings"]["visibility_timeout_ms"]), 60_000);

    send(&q, "g", "1", "x");
    send(&q, "g", "2", "y");
    send(&q, "h", "3", "z");
    received(&["receive", q.s()]);
    let p = json(&["purge", q.s()]);
    assert_eq!(u(&p["purged"]), 3);
    assert_eq!(u(&stat(&q)["messages"]["visible"]), 0);
    assert_eq!(received(&["receive", q.s()]), Value::Array(vec![]));

    // A bridge's status file beside it is shown by stat, unless it names another creation
    // (left by the bridge of an earlier queue of the name, removed by `rm`, the library's
    // `unlink` or serve's DeleteQueue); one that names none (an older bridge's) is shown.
    let status = format!("{}.bridge.json", q.path().display());
    std::fs::write(&status, r#"{"queue_created_ms":1,"forwarded":5}"#).unwrap();
    assert_eq!(stat(&q).get("bridge"), None, "an earlier queue's status");
    std::fs::write(&status, r#"{"forwarded":7}"#).unwrap();
    assert_eq!(u(&stat(&q)["bridge"]["forwarded"]), 7);
    // It goes with the queue (a new queue of the name showed its counts).
    let r = json(&["unlink", q.s()]);
    assert_eq!(r["unlinked"], q.path().display().to_string());
    assert!(!q.path().exists());
    assert!(!std::path::Path::new(&status).exists());
    expect(&["stat", q.s()], 10);
}

/// A receive retried with its attempt id (R11) gets the same messages and receipt handles,
/// without counting a second receive.
#[test]
fn receive_attempt_id_replays() {
    let q = create("attempt", &[]);
    send(&q, "g", "1", "x");
    send(&q, "g", "2", "y");
    let first = received(&["receive", q.s(), "-n", "10", "--attempt-id", "batch-1"]);
    let again = received(&["receive", q.s(), "-n", "10", "--attempt-id", "batch-1"]);
    assert_eq!(first.as_array().unwrap().len(), 2);
    for (a, b) in first
        .as_array()
        .unwrap()
        .iter()
        .zip(again.as_array().unwrap())
    {
        assert_eq!(a["ReceiptHandle"], b["ReceiptHandle"]);
        assert_eq!(b["Attributes"]["ApproximateReceiveCount"], "1");
    }
    assert_eq!(u(&stat(&q)["counters"]["received"]), 2);
    // Another id: a fresh receive, and the group is in flight.
    assert_eq!(
        received(&["receive", q.s(), "--attempt-id", "batch-2"]),
        Value::Array(vec![])
    );
}

/// Ctrl-C (SIGINT) or SIGTERM ends `watch` and a long-poll `receive` at once and
/// cleanly: exit 0, and the queue counts no dead participant (the handle was closed, not
/// left registered by a dying process).
#[test]
fn ctrl_c_is_a_clean_exit() {
    let q = create("sigint", &[]);
    for (args, sig) in [
        (vec!["watch", q.s(), "--interval", "1s"], "-INT"),
        (vec!["receive", q.s(), "--wait", "20s"], "-INT"),
        (vec!["watch", q.s(), "--interval", "1s", "--json"], "-TERM"),
    ] {
        let mut child = std::process::Command::new(BIN)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let started = std::time::Instant::now();
        let killed = std::process::Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{args:?}: still running after {sig}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(status.success(), "{args:?} after {sig}: {status:?}");
    }
    let s = stat(&q);
    assert_eq!(u(&s["counters"]["participants_recovered"]), 0, "{s}");
    // Only `stat` itself is registered now.
    let recover = json(&["recover", q.s()]);
    assert_eq!(u(&recover["dead_participants"]), 0, "{recover}");

    // `send --wait` on a full queue: ended within 100 ms, exit code 130, nothing sent (it
    // waited out its whole --wait, Ctrl-C ignored). A body read from stdin, cut by Ctrl-C: the
    // process ends at once and sends nothing (it was sent at end of input).
    let full = Q::named("sigint-full");
    expect(
        &[
            "create",
            full.s(),
            "--max-messages",
            "4",
            "--size-limit",
            "0",
        ],
        0,
    );
    for g in ["a", "b", "c", "d"] {
        send(&full, g, g, "x");
    }
    // `waiting`: the signal only once the command has joined the queue (its handlers are
    // installed before that), else at any time (the default disposition all along).
    let interrupt = |args: &[&str], sig: &str, waiting: bool| {
        let mut child = std::process::Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The body's first bytes, stdin kept open.
        {
            use std::io::Write;
            child.stdin.as_mut().unwrap().write_all(b"partial").unwrap();
        }
        let joined = std::time::Instant::now();
        while waiting
            && !stat(&full)["participants"]["list"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["pid"] == child.id() && p["alive"] == true)
        {
            assert!(
                joined.elapsed() < Duration::from_secs(10),
                "{args:?} never joined"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        let started = std::time::Instant::now();
        assert!(std::process::Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap()
            .success());
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "{args:?}: still running after {sig}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    };
    let out = interrupt(
        &["send", full.s(), "-g", "e", "-d", "e", "--wait", "30s", "x"],
        "-INT",
        true,
    );
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not sent"),
        "{out:?}"
    );
    let out = interrupt(
        &["send", full.s(), "--wait", "30s", "--batch", "-"],
        "-TERM",
        false,
    );
    assert_eq!(
        out.status.code(),
        None,
        "killed while reading its input: {out:?}"
    );
    received(&["receive", full.s(), "--max", "1", "--delete"]);
    let out = interrupt(
        &["send", full.s(), "-g", "p", "-d", "p", "-"],
        "-INT",
        false,
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(2), "ended by Ctrl-C: {out:?}");
    assert_eq!(u(&stat(&full)["messages"]["visible"]), 3, "nothing sent");
}

/// Mistakes of a first hour, refused plainly: a redrive into the queue it takes from (it
/// dropped every message as a duplicate of itself, or moved them round for ever), a body of
/// endless input (read until memory ran out), a value with a unit out of range (the error
/// named the millisecond attribute the CLI had set instead).
#[test]
fn first_hour_mistakes_are_refused_plainly() {
    let q = create("mistakes", &[]);
    send(&q, "g", "1", "x");
    let (_, err) = expect(&["redrive", q.s(), "--to", q.s()], 20);
    assert!(err.contains("is the queue redriven"), "{err}");
    assert_eq!(u(&stat(&q)["messages"]["visible"]), 1, "nothing moved");
    let (_, err) = expect(
        &["send", q.s(), "-g", "g", "-d", "2", "--file", "/dev/zero"],
        3,
    );
    assert!(err.contains("longer than 1048576 bytes"), "{err}");
    let (_, err) = expect(&["set", q.s(), "VisibilityTimeout", "13h"], 19);
    assert!(
        err.contains("parameter VisibilityTimeout.") && !err.contains("VisibilityTimeoutMs"),
        "{err}"
    );
    let (out, _) = expect(&["purge", q.s()], 0);
    assert!(out.contains("purged 1 message from"), "{out}");
    // No advice that cannot be followed: no queue takes more than 1 MiB.
    let (_, err) = expect(&["set", q.s(), "MaximumMessageSize", "2MiB"], 19);
    assert!(!err.contains("larger maximum_message_size"), "{err}");
    // Hints that lead somewhere: over a file that is not a queue (`unlink` refuses it), over
    // a directory, on a queue whose permissions were widened.
    let plain = Q::named("plain-file");
    std::fs::write(plain.path(), b"notes").unwrap();
    let (_, err) = expect(&["create", plain.s()], 11);
    assert!(
        err.contains("is not a shmfifo queue") && !err.contains("shmfifo unlink"),
        "{err}"
    );
    std::fs::remove_file(plain.path()).unwrap();
    let (_, err) = expect(&["create", "/dev/shm/"], 11);
    assert!(err.contains("is a directory"), "{err}");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(q.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, err) = expect(&["stat", q.s()], 40);
    assert!(err.contains("0644") && err.contains("chmod 600"), "{err}");
    std::fs::set_permissions(q.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// One duration syntax everywhere: `set` takes `30s`, `500ms` or `1h 30m` for the
/// settings SQS keeps in seconds (plain numbers stay seconds).
#[test]
fn set_takes_durations_with_units() {
    let q = create("setdur", &[]);
    json(&["set", q.s(), "VisibilityTimeout", "1m 30s"]);
    assert_eq!(u(&stat(&q)["settings"]["visibility_timeout_ms"]), 90_000);
    json(&["set", q.s(), "DelaySeconds", "1500ms"]);
    assert_eq!(u(&stat(&q)["settings"]["delay_ms"]), 1_500);
    json(&["set", q.s(), "VisibilityTimeout", "45"]);
    assert_eq!(u(&stat(&q)["settings"]["visibility_timeout_ms"]), 45_000);
    // A malformed value on the command line is a usage error, as clap's own (exit code 2).
    expect(&["set", q.s(), "VisibilityTimeout", "10 parsecs"], 2);
    // The receive wait (whole seconds in SQS, no millisecond name) takes whole seconds too.
    json(&["set", q.s(), "ReceiveMessageWaitTimeSeconds", "20s"]);
    assert_eq!(
        u(&stat(&q)["settings"]["receive_message_wait_time_ms"]),
        20_000
    );
    json(&["set", q.s(), "ReceiveMessageWaitTimeSeconds", "5"]);
    assert_eq!(
        u(&stat(&q)["settings"]["receive_message_wait_time_ms"]),
        5_000
    );
    expect(
        &["set", q.s(), "ReceiveMessageWaitTimeSeconds", "1500ms"],
        2,
    );
    // Sizes take units, as everywhere in the CLI.
    json(&["set", q.s(), "MaximumMessageSize", "128KiB"]);
    assert_eq!(u(&stat(&q)["settings"]["maximum_message_size"]), 128 * 1024);
    expect(&["set", q.s(), "MaximumMessageSize", "12 parsecs"], 2);
    // A whole number too large for any setting is refused by the setting's range, not as
    // "not a number".
    let (_, e) = expect(
        &[
            "set",
            q.s(),
            "MessageRetentionPeriod",
            "99999999999999999999",
        ],
        19,
    );
    assert!(!e.contains("non-negative integer"), "{e}");
}

/// `send --batch` takes aws's entries (a JSON array, or `{"Entries": [...]}`) and
/// what `receive --json` prints, so `receive | transform | send --batch` moves messages with
/// their group, dedup id and attributes.
#[test]
fn send_batch_takes_aws_entries_and_receive_output() {
    let a = create("pipe-a", &[]);
    let b = create("pipe-b", &[]);
    let entries = r#"[
        {"Id": "1", "MessageBody": "one", "MessageGroupId": "g", "MessageDeduplicationId": "d1",
         "MessageAttributes": {"kind": {"DataType": "String", "StringValue": "order"}}},
        {"Id": "2", "MessageBody": "two", "MessageGroupId": "g", "MessageDeduplicationId": "d2"}
    ]"#;
    let out = cmd(&["send", a.s(), "--batch", "-", "--json"])
        .write_stdin(entries)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrapped = r#"{"QueueUrl": "http://localhost/q.fifo", "Entries": [{"Id": "3", "MessageBody": "three", "MessageGroupId": "h", "MessageDeduplicationId": "d3"}]}"#;
    cmd(&["send", a.s(), "--batch", "-"])
        .write_stdin(wrapped)
        .assert()
        .code(0);
    // receive A --json | send B --batch -
    let got = cmd(&["receive", a.s(), "-n", "10", "--delete", "--json"])
        .output()
        .unwrap();
    assert!(got.status.success());
    cmd(&["send", b.s(), "--batch", "-"])
        .write_stdin(got.stdout)
        .assert()
        .code(0);
    let moved = received(&["receive", b.s(), "-n", "10"]);
    let moved = moved.as_array().unwrap();
    let mut seen: Vec<(String, String, String)> = moved
        .iter()
        .map(|m| {
            (
                m["Attributes"]["MessageGroupId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                m["Attributes"]["MessageDeduplicationId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                m["Body"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("g".into(), "d1".into(), "one".into()),
            ("g".into(), "d2".into(), "two".into()),
            ("h".into(), "d3".into(), "three".into()),
        ]
    );
    let one = moved.iter().find(|m| m["Body"] == "one").unwrap();
    assert_eq!(one["MessageAttributes"]["kind"]["StringValue"], "order");
}

/// R6: groups are served in the order they became ready: a, b, c received and
/// deleted, then d, a, b sent: a receive returns d, a, b. `peek` shows the same messages (in
/// group-table order, as documented).
#[test]
fn r6_groups_are_served_in_the_order_they_became_ready() {
    let q = create("r6", &["--deduplication-scope", "off"]);
    let groups = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|m| {
                m["Attributes"]["MessageGroupId"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    for g in ["a", "b", "c"] {
        expect(&["send", q.s(), "--group", g, g], 0);
    }
    let first = received(&["receive", q.s(), "-n", "10", "--delete"]);
    assert_eq!(groups(&first), ["a", "b", "c"]);
    for g in ["d", "a", "b"] {
        expect(&["send", q.s(), "--group", g, g], 0);
    }
    let mut peeked = groups(&received_code(&["peek", q.s(), "-n", "10"], 0));
    peeked.sort();
    assert_eq!(peeked, ["a", "b", "d"]);
    assert_eq!(
        groups(&received(&["receive", q.s(), "-n", "10"])),
        ["d", "a", "b"]
    );
}

/// With `-v`, the library's events reach stderr: a quarantine of a damaged group
/// during `recover`, which also reports the dropped message ids.
#[test]
fn verbose_shows_the_library_events() {
    let q = create("verbose", &["--deduplication-scope", "off"]);
    expect(&["send", q.s(), "--group", "the-damaged-group", "x"], 0);
    // Break the group's list: its `head` (32 bytes into the entry; the id is 96 bytes in,
    // layout 19, pinned in the library's `layout.rs`).
    let path = format!("/dev/shm/{}", q.s());
    let bytes = std::fs::read(&path).unwrap();
    let at = bytes
        .windows(9)
        .position(|w| w == b"the-damag")
        .expect("the group id is in the arena");
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&0xFFFF_FFF0_u64.to_le_bytes(), (at - 96 + 32) as u64)
            .unwrap();
    }
    let (o, e) = expect(&["recover", q.s(), "-v", "--json"], 0);
    assert!(e.contains("quarantined a group"), "{e}");
    let r: Value = serde_json::from_str(&o).unwrap();
    assert_eq!(u(&r["quarantined_groups"]), 1);
    assert_eq!(r["dropped"].as_array().unwrap().len(), 1);
    // Without -v, nothing on stderr.
    let (_, e) = expect(&["recover", q.s()], 0);
    assert_eq!(e, "");
}

/// `ls`, `stat`, `peek` and `watch` observe without joining: they work on a queue whose only
/// participant slot is held, and leave no participant behind.
#[test]
fn inspection_commands_observe_without_joining() {
    let q = create("observe", &["--max-participants", "1"]);
    send(&q, "g", "1", "hello");
    let holder = shmfifo::Queue::open(q.s()).unwrap();
    // Joining is refused (ParticipantLimitReached)...
    expect(&["send", q.s(), "--group", "g", "--dedup-id", "2", "x"], 34);
    // ...looking is not, and the holder is the only participant.
    let s = stat(&q);
    assert_eq!(u(&s["participants"]["alive"]), 1, "{s}");
    let m = received(&["peek", q.s()]);
    assert_eq!(m[0]["Body"], "hello");
    let (o, _) = expect(&["ls", "--json"], 0);
    assert!(o.contains(q.s()), "{o}");
    expect(&["watch", q.s(), "--count", "1"], 0);
    drop(holder);
    // Nothing changed: the message is still visible, received for the first time here.
    let m = received(&["receive", q.s()]);
    assert_eq!(m[0]["Attributes"]["ApproximateReceiveCount"], "1");
}

/// `send --json` and `receive --json` carry SQS's digests (S10, M3), as `aws sqs` prints them:
/// MD5 of the body, and SQS's MD5 of the message attributes, equal on both sides.
#[test]
fn json_answers_carry_sqs_md5_digests() {
    let q = create("md5", &[]);
    let s = json(&[
        "send",
        q.s(),
        "--group",
        "g",
        "--dedup-id",
        "1",
        "-a",
        "k=String:v",
        "hello",
    ]);
    assert_eq!(s["MD5OfMessageBody"], "5d41402abc4b2a76b9719d911017c592");
    let r = received(&["receive", q.s()]);
    assert_eq!(r[0]["MD5OfBody"], "5d41402abc4b2a76b9719d911017c592");
    assert_eq!(r[0]["MD5OfMessageAttributes"], s["MD5OfMessageAttributes"]);
    assert_eq!(s["MD5OfMessageAttributes"].as_str().map(str::len), Some(32));
}

/// `send`, `receive`, `delete`, `set`, `stat` and `purge` on an SQS queue URL (SQS's API
/// served by `shmfifo serve` here); an unreachable endpoint is exit code 41 (`Remote`).
#[cfg(feature = "sqs")]
#[test]
fn commands_on_an_sqs_queue_url() {
    let dir = Dir::new("remote");
    let mut server = std::process::Command::new(BIN)
        .args(["serve", "--port", "0", "--dir", dir.0.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let endpoint = line.trim().trim_start_matches("listening on ").to_owned();
    expect(&["create", dir.0.join("r.fifo").to_str().unwrap()], 0);
    let url = format!("{endpoint}/000000000000/r.fifo");
    let run = |args: &[&str], code: i32| -> String {
        let out = cmd(args)
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("AWS_ENDPOINT_URL")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let s: Value = serde_json::from_str(&run(
        &[
            "--json",
            "send",
            &url,
            "--group",
            "g",
            "--dedup-id",
            "1",
            "hello",
        ],
        0,
    ))
    .unwrap();
    assert_eq!(s["MD5OfMessageBody"], "5d41402abc4b2a76b9719d911017c592");
    let r: Value = serde_json::from_str(&run(&["--json", "receive", &url], 0)).unwrap();
    let m = &r["Messages"][0];
    assert_eq!(m["Body"], "hello");
    assert_eq!(m["MessageId"], s["MessageId"]);
    run(&["delete", &url, m["ReceiptHandle"].as_str().unwrap()], 0);
    run(&["set", &url, "VisibilityTimeout", "45s"], 0);
    let st: Value = serde_json::from_str(&run(&["--json", "stat", &url], 0)).unwrap();
    assert_eq!(st["Attributes"]["VisibilityTimeout"], "45");
    assert_eq!(st["Attributes"]["ApproximateNumberOfMessages"], "0");
    run(
        &["send", &url, "--group", "g", "--dedup-id", "2", "again"],
        0,
    );
    run(&["purge", &url], 0);
    assert!(run(&["receive", &url], 0).is_empty());
    // S1 through SQS: the same error, the same exit code as locally.
    let out = cmd(&["send", &url, "--group", "has space", "--dedup-id", "3", "x"])
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(20), "InvalidParameterValue");
    server.kill().unwrap();
    server.wait().unwrap();
    run(&["stat", "http://127.0.0.1:1/000000000000/gone.fifo"], 41);
}

/// Runs the shell `script` in a private mount namespace (`unshare -rm`) with a fresh 64 MiB
/// tmpfs, Docker's default `/dev/shm`, at `$D` and this crate's `shmfifo` as `$B` (`set -u`);
/// its standard output, the script having exited 0 (a file `$D.err` beside the mount point is
/// removed after). `None`, having said so, where user namespaces are not allowed.
fn in_a_64_mib_tmpfs(script: &str) -> Option<String> {
    if !std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: no private mount namespace here (unshare -rm)");
        return None;
    }
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shmfifo-64m-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!("set -u\nmount -t tmpfs -o size=64m shm \"$D\" || exit 90\n{script}");
    let out = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .env("D", &dir)
        .env("B", BIN)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(dir.with_extension("err"));
    let _ = std::fs::remove_dir(&dir);
    let o = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?}\n{o}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(o)
}

/// Three queues with the default settings fit in a container's default 64 MiB
/// `/dev/shm`, and work there; a fourth does not fit and `create` says so (NoSpace, exit 17)
/// with how much it needs and what to do, while creating an existing one again succeeds (it
/// exists with these settings). Run on a 64 MiB tmpfs mounted in a private mount
/// namespace (`unshare -rm`); where user namespaces are not allowed it says so and checks
/// nothing (the size itself is checked by `three_default_queues_fit_in_64_mib` in the
/// library).
#[test]
fn default_queues_fit_in_a_64_mib_dev_shm() {
    let script = r#"for q in a b a-dlq; do "$B" create "$D/$q" >/dev/null || exit 91; done
"$B" send "$D/a" --group g --dedup-id 1 hello >/dev/null || exit 92
"$B" receive "$D/a" >/dev/null || exit 93
"$B" create "$D/c" --json 2>"$D.err"; echo "exit $?"
cat "$D.err"
"$B" create "$D/b" >/dev/null; echo "again $?"
df -k "$D" | tail -1"#;
    let Some(o) = in_a_64_mib_tmpfs(script) else {
        return;
    };
    assert!(o.contains("exit 17"), "the fourth queue must not fit: {o}");
    // An existing queue created again with the same settings is success as SQS answers it,
    // the file system full or not (it said NoSpace: the new arena was made before the name
    // was found taken).
    assert!(o.contains("again 0"), "{o}");
    assert!(o.contains("\"Code\":\"shmfifo.NoSpace\""), "{o}");
    assert!(
        o.contains("16.7 MiB"),
        "the error names the size needed: {o}"
    );
    assert!(
        o.contains("--max-messages"),
        "the hint names smaller settings: {o}"
    );
}

/// The first hour in a container: a default queue in Docker's default 64 MiB `/dev/shm` (a
/// fresh 64 MiB tmpfs here) holds more than its base file's 8,192 small messages and takes
/// SQS's 1 MiB `MaximumMessageSize`: its default size limit is the base file plus a quarter of
/// the space beside it (28.5 MiB there), where a quarter of all the space (16 MiB, less than
/// the 16.7 MiB base file) left it no room to grow. Creating it again with the same
/// arguments succeeds, as SQS's CreateQueue does, before and after it grew (the default limit
/// compared is the queue's own, not a share of the space left now; the dedup table compared is
/// the base file's, not the 32,768 entries it holds after 10,000 new ids).
#[test]
fn a_default_queue_in_a_64_mib_dev_shm_grows_past_its_base_file() {
    // 10,000 messages in ten groups, so each batch of ten goes one slot a message (a batch's
    // messages to one group would go as one pack).
    let script = r#""$B" create "$D/a" >/dev/null || exit 91
"$B" create "$D/a" >/dev/null || exit 94
seq 1 10000 | awk '{printf "{\"group\":\"g%d\",\"body\":\"m%d\",\"dedup_id\":\"%d\"}\n", $1 % 10, $1, $1}' \
    | "$B" send "$D/a" --batch - >/dev/null || exit 92
"$B" create "$D/a" >/dev/null || exit 95
"$B" set "$D/a" MaximumMessageSize 1048576 >/dev/null || exit 93
"$B" stat "$D/a" --json"#;
    let Some(o) = in_a_64_mib_tmpfs(script) else {
        return;
    };
    let v: Value = serde_json::from_str(&o).unwrap_or_else(|e| panic!("{e}: {o}"));
    assert_eq!(v["messages"]["visible"], 10_000, "{o}");
    // The dedup table grew (the create again above compared its base file's 16,384).
    assert_eq!(v["dedup"]["entries"], 32_768, "{o}");
    let (bytes, base, limit) = (
        v["size"]["bytes"].as_u64().unwrap(),
        v["size"]["base_bytes"].as_u64().unwrap(),
        v["size"]["limit_bytes"].as_u64().unwrap(),
    );
    assert!(bytes > base, "the queue grew: {o}");
    assert_eq!(
        v["size_classes"][0]["max_slots"], 32_768,
        "room for four times the base file's small messages: {o}"
    );
    // The base file plus a quarter of the rest of 64 MiB (the tmpfs had nothing else).
    assert_eq!(limit, base + ((64 << 20) - base) / 4, "{o}");
    assert!(
        v["size_classes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["payload_bytes"].as_u64().unwrap() >= 1 << 20),
        "a class for 1 MiB messages: {o}"
    );
}

/// The operator's path (create with a dead-letter queue, send, watch, receive,
/// scrape the metrics endpoint, redrive, errors, `send --wait`), in a container's conditions:
/// `cli/session.sh` runs each command in a mount namespace with a 64 MiB tmpfs on /dev/shm and
/// checks its exit status. The README and cli/README.md show this session.
#[test]
fn the_operators_session_runs_in_a_container_sized_dev_shm() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("session.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(BIN)
        .output()
        .unwrap();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if out.status.code() == Some(77) {
        eprintln!("skipped: this machine cannot make a mount namespace: {e}");
        return;
    }
    assert!(out.status.success(), "{e}\n{o}");
    for want in [
        "tmpfs            64M",
        "created orders (/dev/shm/orders, 16.7 MiB)",
        "orders-dlq        3",
        "ApproximateNumberOfMessagesVisible{queue=\"orders-dlq\"} 3",
        "moved 3 messages from orders-dlq",
        "order #3\t1",
        "[exit 10]",
    ] {
        assert!(o.contains(want), "missing {want:?} in\n{o}");
    }
}

/// `send --batch` takes what `aws sqs send-message-batch --cli-input-json` takes (the filled-in
/// skeleton: QueueUrl, Entries with Id, DelaySeconds, both attribute value keys) and answers
/// as aws does: `Successful` with the caller's ids, `MessageId`, `MD5OfMessageBody`,
/// `MD5OfMessageAttributes` and `SequenceNumber`; `Failed` with the caller's id,
/// `SenderFault`, `Code` and `Message` (a per-entry failure: a non-zero DelaySeconds, refused
/// on a FIFO queue as SQS does, while the other entries are sent).
#[test]
fn send_batch_answers_in_aws_shapes_with_the_callers_ids() {
    let q = create("aws-shape", &[]);
    let skeleton = r#"{
        "QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/orders.fifo",
        "Entries": [
            {"Id": "e1", "MessageBody": "hello", "DelaySeconds": 0,
             "MessageAttributes": {"kind": {"StringValue": "order", "BinaryValue": null,
                 "StringListValues": [], "BinaryListValues": [], "DataType": "String"}},
             "MessageDeduplicationId": "d1", "MessageGroupId": "g"},
            {"Id": "late", "MessageBody": "delayed", "DelaySeconds": 5,
             "MessageDeduplicationId": "d2", "MessageGroupId": "g"},
            {"Id": "e3", "MessageBody": "world", "MessageDeduplicationId": "d3",
             "MessageGroupId": "g"}
        ]
    }"#;
    let out = cmd(&["send", q.s(), "--batch", "-", "--json"])
        .write_stdin(skeleton)
        .output()
        .unwrap();
    // The failed entry's exit code (InvalidParameterValue: 20).
    assert_eq!(
        out.status.code(),
        Some(20),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ok = v["Successful"].as_array().unwrap();
    let ids: Vec<&str> = ok.iter().map(|e| e["Id"].as_str().unwrap()).collect();
    // e3, of the same group after the refused entry, is not sent: it would be enqueued
    // ahead of a retry of `late` (S13's entries fail alone; the command checks every entry
    // first and sends up to the first refused one).
    assert_eq!(ids, ["e1"], "{v}");
    assert_eq!(u(&v["Unsent"]), 1, "{v}");
    // MD5 of "hello", and SQS's digest of the one attribute.
    assert_eq!(
        ok[0]["MD5OfMessageBody"],
        "5d41402abc4b2a76b9719d911017c592"
    );
    assert!(ok[0]["MD5OfMessageAttributes"].is_string(), "{v}");
    for e in ok {
        assert!(
            e["MessageId"].is_string() && e["SequenceNumber"].is_string(),
            "{e}"
        );
    }
    let failed = v["Failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(failed[0]["Id"], "late");
    assert_eq!(failed[0]["SenderFault"], true);
    assert_eq!(failed[0]["Code"], "InvalidParameterValue");
    assert!(
        failed[0]["Message"]
            .as_str()
            .unwrap()
            .contains("DelaySeconds"),
        "{v}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("entry 2 (Id late)"), "{err}");
    let got = received(&["receive", q.s(), "-n", "10"]);
    let bodies: Vec<&str> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["hello"]);
    assert_eq!(
        got[0]["MD5OfMessageAttributes"], ok[0]["MD5OfMessageAttributes"],
        "the digest receive reports"
    );

    // A bare list of entries; the table shows the caller's ids.
    let (o, _) = {
        let a = cmd(&["send", q.s(), "--batch", "-"])
            .write_stdin(r#"[{"Id": "only-one", "MessageBody": "x", "MessageGroupId": "h", "MessageDeduplicationId": "d9"}]"#)
            .assert()
            .code(0);
        let o = a.get_output();
        (
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert!(o.starts_with("ID "), "{o}");
    assert!(o.contains("only-one "), "{o}");
    // A batch entry id SQS refuses: the batch is refused as a request, under each entry's id.
    let bad = cmd(&["send", q.s(), "--batch", "-", "--json"])
        .write_stdin(r#"[{"Id": "no spaces", "MessageBody": "x", "MessageGroupId": "h", "MessageDeduplicationId": "d10"}]"#)
        .assert()
        .failure();
    let v: Value = serde_json::from_slice(&bad.get_output().stdout).unwrap();
    assert_eq!(v["Failed"][0]["Id"], "no spaces");
    assert_eq!(
        v["Failed"][0]["Code"],
        "AWS.SimpleQueueService.InvalidBatchEntryId"
    );
}

/// `create --body-mode binary` (an extension): `send --file` takes any bytes,
/// `receive --json` shows them in base64 (said by `BodyEncoding`), and `send --batch` decodes
/// them back, so bytes survive a pipe from one binary queue to another; `stat` says the mode;
/// a text queue refuses a file that is not text (S7) as an input error.
#[test]
fn binary_bodies_round_trip_through_the_cli() {
    let a = create("bin-a", &["--body-mode", "binary"]);
    let b = create("bin-b", &["--body-mode", "binary"]);
    let text = create("bin-text", &[]);
    assert_eq!(stat(&a)["settings"]["body_mode"], "binary");
    assert_eq!(stat(&text)["settings"]["body_mode"], "text");
    let frame: Vec<u8> = vec![0, 0xff, 0x01, 0xfe, b'\n', 0x80];
    let dir = std::env::temp_dir().join(format!("shmfifo-cli-bin-{}", std::process::id()));
    std::fs::write(&dir, &frame).unwrap();
    let f = dir.display().to_string();
    json(&["send", a.s(), "-g", "g", "-d", "f1", "--file", &f]);
    let (_, err) = expect(&["send", text.s(), "-g", "g", "-d", "f1", "--file", &f], 3);
    assert!(
        err.contains("not UTF-8") && err.contains("--body-mode binary"),
        "{err}"
    );
    let got = received(&["receive", a.s(), "--max", "1"]);
    assert_eq!(got[0]["BodyEncoding"], "base64");
    let body = got[0]["Body"].as_str().unwrap();
    let line = serde_json::to_string(&got[0]).unwrap();
    let mut pipe = std::process::Command::new(BIN)
        .args(["send", b.s(), "--batch", "-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    pipe.stdin
        .take()
        .unwrap()
        .write_all(line.as_bytes())
        .unwrap();
    assert_eq!(pipe.wait_with_output().unwrap().status.code(), Some(0));
    let (shown, _) = expect(&["peek", b.s()], 0);
    assert!(shown.contains("(base64)"), "{shown}");
    let moved = received(&["receive", b.s(), "--max", "1"]);
    assert_eq!(moved[0]["Body"].as_str().unwrap(), body, "the same bytes");
    let _ = std::fs::remove_file(&dir);
}

/// The command line says what it takes: `receive --wait` up to 20 s, as its help says (a
/// longer wait, plain or with units, is a usage error); `send`'s usage puts QUEUE before the
/// body; aws's flag names (`--message-group-id`, `--message-deduplication-id`,
/// `--max-number-of-messages`, `--wait-time-seconds`) are taken as aliases.
#[test]
fn command_line_limits_usage_and_aws_flag_names() {
    let q = create("flags", &[]);
    for long in ["21s", "21", "1h 30m", "20001ms"] {
        let (_, e) = expect(&["receive", q.s(), "--wait", long], 2);
        assert!(e.contains("longer than 20s"), "{long}: {e}");
    }
    expect(&["receive", q.s(), "--wait", "20ms"], 0);
    let (help, _) = expect(&["send", "--help"], 0);
    assert!(
        help.contains("Usage: shmfifo send [OPTIONS] <QUEUE> <BODY|-|--file FILE|--batch FILE|->"),
        "{help}"
    );
    assert!(
        help.contains("message-group-id"),
        "the alias is shown: {help}"
    );
    let (_, e) = expect(&["send"], 2);
    assert!(
        e.contains("Usage: shmfifo send [OPTIONS] <QUEUE> <BODY"),
        "{e}"
    );
    let s = json(&[
        "send",
        q.s(),
        "--message-group-id",
        "g",
        "--message-deduplication-id",
        "d",
        "aws names",
    ]);
    assert!(s["MessageId"].is_string());
    let got = received(&[
        "receive",
        q.s(),
        "--max-number-of-messages",
        "10",
        "--wait-time-seconds",
        "1",
    ]);
    assert_eq!(got[0]["Body"], "aws names");
    assert_eq!(got[0]["Attributes"]["MessageGroupId"], "g");
    assert_eq!(got[0]["Attributes"]["MessageDeduplicationId"], "d");
}

/// `shmfifo serve` in `dir` with `args` and `env`; its endpoint.
fn start_serve(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut c = std::process::Command::new(BIN);
    c.args(["serve", "--port", "0", "--dir", dir.to_str().unwrap()])
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut server = c.spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let endpoint = line.trim().trim_start_matches("listening on ").to_owned();
    (server, endpoint)
}

/// One SQS JSON-protocol request (`AmazonSQS.{action}`) to `endpoint`; the response's status.
fn sqs_json(endpoint: &str, action: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let addr = endpoint.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST / HTTP/1.1\r\nHost: {addr}\r\nX-Amz-Target: AmazonSQS.{action}\r\n\
         Content-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = String::new();
    s.read_to_string(&mut r).unwrap();
    r.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Stops a server and returns what it logged.
fn stop_serve(mut server: Child) -> String {
    server.kill().unwrap();
    let out = server.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Logging: RUST_LOG is honoured without `-v` (here serve's debug level: one line per
/// request with its method, action, status and duration); `-v` logs at info (a message move
/// task's start and end, with its source and what it moved) and leaves requests out; every
/// line starts with its time (RFC 3339, UTC).
#[test]
fn logs_honour_rust_log_and_carry_timestamps_and_requests() {
    let dir = Dir::new("logs");
    let (server, endpoint) = start_serve(&dir.0, &[], &[("RUST_LOG", "shmfifo_serve=debug")]);
    assert_eq!(sqs_json(&endpoint, "ListQueues", "{}"), 200);
    assert_eq!(
        sqs_json(&endpoint, "GetQueueUrl", r#"{"QueueName": "none.fifo"}"#),
        400
    );
    let log = stop_serve(server);
    let requests: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" request ") && l.contains("method="))
        .collect();
    assert_eq!(requests.len(), 2, "{log}");
    for (l, (action, status)) in requests
        .iter()
        .zip([("ListQueues", 200), ("GetQueueUrl", 400)])
    {
        assert!(
            l.contains("DEBUG")
                && l.contains("method=POST")
                && l.contains(&format!("action={action}"))
                && l.contains(&format!("status={status}"))
                && l.contains(" ms="),
            "{l}"
        );
        let (ts, _) = l.split_once(' ').unwrap();
        assert!(
            ts.len() >= 20 && ts.as_bytes()[4] == b'-' && ts.contains('T') && ts.ends_with('Z'),
            "a timestamp first: {l}"
        );
    }

    // -v: info. A move task from a dead-letter queue to another queue is logged.
    let dlq = dir.0.join("dlq.fifo");
    let dst = dir.0.join("dst.fifo");
    // dst's dead-letter queue is dlq (a move task's source must be some queue's).
    expect(&["create", dlq.to_str().unwrap()], 0);
    expect(
        &[
            "create",
            dst.to_str().unwrap(),
            "--dead-letter-queue",
            dlq.to_str().unwrap(),
            "--max-receive-count",
            "3",
        ],
        0,
    );
    json(&["send", dlq.to_str().unwrap(), "-g", "g", "-d", "1", "x"]);
    let (server, endpoint) = start_serve(&dir.0, &["-v"], &[]);
    let body = r#"{"SourceArn": "arn:aws:sqs:us-east-1:000000000000:dlq.fifo",
                   "DestinationArn": "arn:aws:sqs:us-east-1:000000000000:dst.fifo"}"#;
    assert_eq!(sqs_json(&endpoint, "StartMessageMoveTask", body), 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while u(&stat(&Q::at(&dst))["messages"]["visible"]) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the task moved nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    let log = stop_serve(server);
    let started = log
        .lines()
        .find(|l| l.contains("message move task started"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        started.contains("INFO") && started.contains("dlq.fifo") && started.contains("dst.fifo"),
        "{started}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("message move task ended") && l.contains("moved=1")),
        "{log}"
    );
    assert!(!log.contains("method="), "no request lines at info: {log}");
}

/// The signature key pair is taken from SHMFIFO_SERVE_SIGNATURE (a command line is readable by
/// every local user): serve then refuses an unsigned request, and says nothing of the secret;
/// on the command line it still works, with a warning.
#[test]
fn serve_takes_its_signature_key_from_the_environment() {
    let dir = Dir::new("serve-sig-env");
    let body = r#"{"QueueNamePrefix":""}"#;
    let (server, endpoint) = start_serve(
        &dir.0,
        &[],
        &[("SHMFIFO_SERVE_SIGNATURE", "AKID:very-secret")],
    );
    assert_eq!(sqs_json(&endpoint, "ListQueues", body), 403);
    let log = stop_serve(server);
    assert!(!log.contains("warning"), "{log}");
    let (server, endpoint) = start_serve(&dir.0, &["--check-signature", "AKID:very-secret"], &[]);
    assert_eq!(sqs_json(&endpoint, "ListQueues", body), 403);
    let log = stop_serve(server);
    assert!(log.contains("SHMFIFO_SERVE_SIGNATURE"), "{log}");
    let help = std::process::Command::new(BIN)
        .args(["serve", "--help"])
        .env("SHMFIFO_SERVE_SIGNATURE", "AKID:very-secret")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("SHMFIFO_SERVE_SIGNATURE"), "{help}");
    assert!(!help.contains("very-secret"), "{help}");
}

/// `receive --delete` deleted the messages before printing them, and ignored a failed write:
/// to a full disk, or into a pipe whose reader was gone, the messages were gone and the exit
/// code 0. Now they are printed first and deleted only once written; a failed write deletes
/// nothing, makes them visible again and exits with the I/O code (35).
#[test]
fn receive_delete_deletes_only_what_it_wrote() {
    let q = create("recv-full", &[]);
    expect(
        &["send", q.s(), "--group", "g", "--dedup-id", "1", "kept"],
        0,
    );
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["receive", q.s(), "--delete", "--json"])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(35),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = stat(&q);
    assert_eq!(u(&s["messages"]["visible"]), 1, "{s}");
    // Written, they are deleted.
    let (o, _) = expect(&["receive", q.s(), "--delete"], 0);
    assert!(o.contains("kept"), "{o}");
    assert_eq!(u(&stat(&q)["messages"]["visible"]), 0);
    // A visibility timeout of 0 made every receipt handle stale at once (H2): the deletes
    // failed and the printed messages came back. Asked for, it is refused; a queue's own
    // zero is not used by --delete.
    expect(
        &["send", q.s(), "--group", "g", "--dedup-id", "2", "once"],
        0,
    );
    expect(
        &["receive", q.s(), "--delete", "--visibility-timeout", "0"],
        2,
    );
    expect(&["set", q.s(), "VisibilityTimeout", "0"], 0);
    let (o, _) = expect(&["receive", q.s(), "--delete"], 0);
    assert!(o.contains("once"), "{o}");
    assert_eq!(u(&stat(&q)["messages"]["visible"]), 0, "deleted");
}
