//! The bridge's status file, `PATH.bridge.json`: its counters over every run on a queue.

use super::BridgeReport;

/// The status file of the bridge of the local queue at `queue_path`: `PATH.bridge.json`, a
/// JSON object `{"remote", "queue_created_ms", "forwarded", "retried", "failed",
/// "dead_lettered", "stopped", "pid", "updated_ms"}` rewritten (by rename) as the counters
/// change. The counters add up over every bridge run on that queue; `stopped` lists the groups
/// the last run stopped. `queue_created_ms` is the queue's creation time
/// ([`QueueAttributes::created_timestamp`](shmfifo::QueueAttributes::created_timestamp)): a
/// file left by the bridge of a queue since removed (by `rm`, the library's `unlink`, serve's
/// `DeleteQueue`) names another creation than a new queue of the name and is not its status.
pub fn status_path(queue_path: &std::path::Path) -> std::path::PathBuf {
    let mut p = queue_path.as_os_str().to_owned();
    p.push(".bridge.json");
    std::path::PathBuf::from(p)
}

/// What a status file holds about the queue created at `queue_created_ms`: `None` if there is
/// none, it does not parse, or it is the status of an earlier queue of the name (see
/// [`status_path`]; a file that names no creation, written by a bridge before it named one, is
/// read).
///
/// The file lies beside the queue, often in a directory every user may write (`/dev/shm`): it
/// is read only if it is a regular file (no symlink followed, no FIFO waited on) of at most
/// [`MAX_STATUS_BYTES`].
pub fn read_status(path: &std::path::Path, queue_created_ms: u64) -> Option<BridgeReport> {
    let v: serde_json::Value = read_small(path).and_then(|b| serde_json::from_slice(&b).ok())?;
    if !v.is_object() || !of_queue(&v, queue_created_ms) {
        return None;
    }
    let n = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    Some(BridgeReport {
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
    })
}

/// Whether status `v` is that of the queue created at `queue_created_ms`: it names that
/// creation, or none (a file of a bridge before it named one).
pub(crate) fn of_queue(v: &serde_json::Value, queue_created_ms: u64) -> bool {
    v.get("queue_created_ms")
        .is_none_or(|c| c.as_u64() == Some(queue_created_ms))
}

/// The longest status file read (the stopped groups' names make it grow: 128 bytes each).
pub const MAX_STATUS_BYTES: u64 = 4 << 20;

/// The bytes of regular file `path`, if it is one of at most [`MAX_STATUS_BYTES`] owned by this
/// process's user or by the queue file's owner (the file it is the status of, its path less
/// `.bridge.json`): not one another user planted beside the queue.
fn read_small(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    let queue_owner = path
        .to_str()
        .and_then(|p| p.strip_suffix(".bridge.json"))
        .and_then(|q| std::fs::symlink_metadata(q).ok())
        .map(|q| q.uid());
    if !m.is_file() || m.len() > MAX_STATUS_BYTES || (m.uid() != me && Some(m.uid()) != queue_owner)
    {
        return None;
    }
    let mut b = Vec::new();
    f.take(MAX_STATUS_BYTES).read_to_end(&mut b).ok()?;
    Some(b)
}

pub(super) fn write_status(
    path: &std::path::Path,
    remote: &str,
    queue_created_ms: u64,
    r: &BridgeReport,
) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let text = serde_json::json!({
        "remote": remote,
        "queue_created_ms": queue_created_ms,
        "forwarded": r.forwarded,
        "retried": r.retried,
        "failed": r.failed,
        "dead_lettered": r.dead_lettered,
        "stopped": r.stopped,
        "pid": std::process::id(),
        "updated_ms": now,
    });
    // Written beside, then renamed over: a reader sees the old file or the new one, whole.
    // The temporary file is made new (never one another user planted under a name they could
    // guess, nor through a symlink), readable by its owner only.
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let tmp = path.with_extension(format!("tmp{}-{nonce:08x}", std::process::id()));
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp);
    if let Ok(mut f) = made {
        // A rename refused (another user's file at the name, in a sticky directory) leaves
        // no temporary file behind.
        // Synced before the rename: on a disk, a crash of the machine after the rename then
        // finds the new file whole, not an empty one under the name (tmpfs, as `/dev/shm`,
        // makes the sync a no-op). At most one a second: the bridge publishes no oftener.
        if f.write_all(format!("{text}\n").as_bytes()).is_err()
            || f.sync_data().is_err()
            || std::fs::rename(&tmp, path).is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status file another user planted: a FIFO is not waited on, a symlink not followed, a
    /// huge file not read; forged counters are read as numbers (and added saturating).
    #[test]
    fn a_planted_status_file_is_read_safely() {
        let dir = std::env::temp_dir().join(format!("shmfifo-status-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo.bridge.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo(3) on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
        assert_eq!(read_status(&fifo, 1), None);
        let target = dir.join("target.json");
        std::fs::write(&target, r#"{"forwarded":5}"#).unwrap();
        let link = dir.join("link.bridge.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(read_status(&link, 1), None, "a symlink is not followed");
        assert_eq!(read_status(&target, 1).unwrap().forwarded, 5);
        let forged = dir.join("forged.bridge.json");
        std::fs::write(&forged, format!(r#"{{"forwarded":{}}}"#, u64::MAX)).unwrap();
        assert_eq!(read_status(&forged, 1).unwrap().forwarded, u64::MAX);
        // A regular file another user owns beside a queue of ours is not read as its status.
        let queue = dir.join("q.fifo");
        std::fs::write(&queue, b"").unwrap();
        let planted = dir.join("q.fifo.bridge.json");
        std::fs::write(&planted, r#"{"forwarded":7}"#).unwrap();
        assert_eq!(read_status(&planted, 1).unwrap().forwarded, 7, "ours");
        let c = std::ffi::CString::new(planted.to_str().unwrap()).unwrap();
        // SAFETY: chown(2) on our own file (the tests run as root in CI; elsewhere it fails
        // with EPERM and the check below is skipped).
        if unsafe { libc::chown(c.as_ptr(), 12345, 12345) } == 0 {
            assert_eq!(read_status(&planted, 1), None, "another user's");
        }
        // The status of an earlier queue of the name (another creation time) is not this
        // queue's; one that names no creation (an older bridge's) is read.
        let earlier = dir.join("earlier.bridge.json");
        let r = BridgeReport {
            forwarded: 3,
            ..BridgeReport::default()
        };
        write_status(&earlier, "sqs://q.fifo", 1_000, &r);
        assert_eq!(
            read_status(&earlier, 1_000).unwrap().forwarded,
            3,
            "this queue's"
        );
        assert_eq!(read_status(&earlier, 2_000), None, "an earlier queue's");
        // Written as a new file of the owner's only.
        let out = dir.join("out.bridge.json");
        write_status(&out, "sqs://q.fifo", 1, &BridgeReport::default());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
