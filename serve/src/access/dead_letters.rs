//! Dead-letter moves made for others: whether a move would reach further than the files' own
//! permissions ([`dead_letter_widens`]), and whether a file's access is more than its mode
//! bits ([`has_acl`]).

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::Identity;

/// Why a move of messages from the queue file `source` into the queue file `target` would
/// reach further than the files' own permissions, if it would: a redrive policy is written in
/// the shared file by any user who may open it (not only through a server), and the server
/// then makes the move with its own rights. So every user who may open `source` must be able
/// to open `target` too, as each would need to in a receive of their own: `source`'s owner
/// (as the group database says, [`Identity::of_uid`]); its group, where the group may open it
/// (then `target` has the same group, which may open it, and its owner may too; or everyone
/// may); everyone, where everyone may (then everyone may open `target`). Stricter than the
/// kernel where a user's access to `target` comes by another route (a member of `source`'s
/// group who owns `target`): such a move is refused.
pub fn dead_letter_widens(source: &Metadata, target: &Metadata) -> Option<String> {
    let (s, t) = (source.mode(), target.mode());
    let rw = |bits: u32| bits & 6 == 6;
    let everyone = rw(t) && rw(t >> 3) && rw(t >> 6);
    if rw(s) && !everyone {
        return Some(format!(
            "every user may open this queue (mode {:o}) and not the dead-letter queue (mode {:o})",
            s & 0o777,
            t & 0o777
        ));
    }
    if rw(s >> 3) && !everyone && !(target.gid() == source.gid() && rw(t >> 3) && rw(t >> 6)) {
        return Some(format!(
            "group {} may open this queue and not the dead-letter queue (group {}, mode {:o})",
            source.gid(),
            target.gid(),
            t & 0o777
        ));
    }
    if !Identity::of_uid(source.uid()).may_open(target) {
        return Some(format!(
            "this queue's owner (uid {}) may not open the dead-letter queue (uid {}, mode {:o})",
            source.uid(),
            target.uid(),
            t & 0o777
        ));
    }
    None
}

/// Whether the file at `path` (not followed) carries a POSIX access control list beyond its
/// mode bits (`system.posix_acl_access`). An error reading it counts as one: a file whose
/// access cannot be read from its bits alone.
pub fn has_acl(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return true;
    };
    // SAFETY: `c` and the attribute name are NUL-terminated; a size query (null buffer,
    // size 0) writes nothing.
    let n = unsafe {
        libc::lgetxattr(
            c.as_ptr(),
            c"system.posix_acl_access".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    if n >= 0 {
        return true;
    }
    // ENODATA: no list; ENOTSUP: the file system keeps none.
    !matches!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENODATA | libc::ENOTSUP)
    )
}
