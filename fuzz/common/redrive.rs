//! Body of the `redrive_policy` fuzz target, shared with the replay test
//! `serve/tests/fuzz_regressions.rs`: the library's RedrivePolicy parser
//! (`shmfifo::parse_redrive_policy`, which reads what `set_attributes`, the C ABI and Python
//! pass it) against serde_json, with which `shmfifo serve` reads a policy before it checks
//! the target.
//!
//! Input: the bytes as text (invalid UTF-8 replaced).
//!
//! The oracle: the parser never panics, and what it accepts serde_json reads as a JSON object
//! with the same target (an SQS queue ARN's last field) and the same count: no text the two
//! read differently, for serve checks the target serde_json sees and the library acts on its
//! own reading (a form feed before the object, once, made them differ).

use serde_json::Value;

/// Runs one input (see the module's documentation).
pub fn redrive_policy(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(p) = shmfifo::parse_redrive_policy(&text) else {
        return;
    };
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("accepted {text:?}, which serde_json refuses: {e}"));
    let Some(obj) = v.as_object() else {
        panic!("accepted {text:?}, which is no JSON object");
    };
    let Some(target) = obj.get("deadLetterTargetArn").and_then(Value::as_str) else {
        panic!("accepted {text:?} without a string target");
    };
    let local = match target.strip_prefix("arn:") {
        Some(_) => target.rsplit(':').next().unwrap_or(""),
        None => target,
    };
    assert_eq!(p.dead_letter_queue, local, "the target of {text:?}");
    let count = match obj.get("maxReceiveCount") {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse::<u64>().ok(),
        _ => None,
    };
    assert_eq!(
        Some(u64::from(p.max_receive_count)),
        count,
        "the count of {text:?}"
    );
}
