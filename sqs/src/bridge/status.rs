//! The bridge's status file, `PATH.bridge.json`: its counters over every run on a queue.

use super::BridgeReport;

/// The status file of the bridge of the local queue at `queue_path`: `PATH.bridge.json`, a
/// JSON object `{"remote", "forwarded", "retried", "failed", "dead_lettered", "stopped",
/// "pid", "updated_ms"}` rewritten (by rename) as the counters change. The counters add up
/// over every bridge run on that queue; `stopped` lists the groups the last run stopped.
pub fn status_path(queue_path: &std::path::Path) -> std::path::PathBuf {
    let mut p = queue_path.as_os_str().to_owned();
    p.push(".bridge.json");
    std::path::PathBuf::from(p)
}

/// What a status file holds (zeros and no stopped group if there is none, or it does not
/// parse).
pub fn read_status(path: &std::path::Path) -> BridgeReport {
    let v: serde_json::Value = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    BridgeReport {
        forwarded: n("forwarded"),
        retried: n("retried"),
        failed: n("failed"),
        dead_lettered: n("dead_lettered"),
        stopped: v
            .get("stopped")
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

pub(super) fn write_status(path: &std::path::Path, remote: &str, r: &BridgeReport) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let text = serde_json::json!({
        "remote": remote,
        "forwarded": r.forwarded,
        "retried": r.retried,
        "failed": r.failed,
        "dead_lettered": r.dead_lettered,
        "stopped": r.stopped,
        "pid": std::process::id(),
        "updated_ms": now,
    });
    // Written beside, then renamed over: a reader sees the old file or the new one, whole.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, format!("{text}\n")).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}
