//! A bridge's status file beside a queue (`QUEUE.bridge.json`, which `shmfifo bridge` keeps),
//! read for a scrape: safely (the file lies where other users may write) and only if it is
//! the status of the queue it lies beside.

use std::os::unix::fs::MetadataExt;

/// The status `status` of the queue created at `created_ms`, whose file `queue_owner` owns:
/// its JSON object, if it is a regular file of this process's user or the queue's owner that
/// parses and is not one left by an earlier queue of the name (it names another creation; one
/// that names none was written by a bridge before it named one).
pub(super) fn read(
    status: &std::path::Path,
    queue_owner: Option<u32>,
    created_ms: u64,
) -> Option<serde_json::Value> {
    read_file(status, queue_owner)
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(|v| {
            v.get("queue_created_ms")
                .is_none_or(|c| c.as_u64() == Some(created_ms))
        })
}

/// The most bytes of a bridge's status file read.
const MAX_STATUS_BYTES: u64 = 4 << 20;

/// The bytes of the bridge status file `status` of a queue whose file is owned by
/// `queue_owner`, if it is a regular file (no symlink followed, no FIFO waited on) of at most
/// [`MAX_STATUS_BYTES`], owned by this process's user or the queue file's owner (not one
/// another user planted beside it).
fn read_file(status: &std::path::Path, queue_owner: Option<u32>) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(status)
        .ok()?;
    let m = f.metadata().ok()?;
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    let me = unsafe { libc::geteuid() };
    if !m.is_file() || m.len() > MAX_STATUS_BYTES || (m.uid() != me && Some(m.uid()) != queue_owner)
    {
        return None;
    }
    let mut b = Vec::new();
    f.take(MAX_STATUS_BYTES).read_to_end(&mut b).ok()?;
    Some(b)
}
