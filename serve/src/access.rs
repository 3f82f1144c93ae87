//! Who a request comes from, and what they may do to the queue files: access through the
//! server is never wider than the files' own permissions.
//!
//! A request acts as one user ([`Identity`]):
//! * when signatures are checked ([`crate::Config::check_signature`]), as the server's own
//!   user: the key pair is the operator's, and a request signed with it is the operator's;
//! * otherwise as the user that owns the client's socket. The server then listens on a
//!   loopback address only (it refuses to start on any other without signatures), and the
//!   owner of the connecting socket is read from the kernel's table of TCP sockets
//!   (`/proc/net/tcp` and `/proc/net/tcp6`: what `ss -e` shows), as the entry whose local
//!   address is the client's and whose remote address is the server's. A connection whose
//!   owner cannot be found (its client already closed the socket, which the table then lists
//!   as nobody's: uid 0, inode 0) is served nothing but `AccessDenied`.
//!
//! Each action is then checked as the system would check the same user's own call: a queue is
//! used only by a user who may open its file for reading and writing (the mode's owner, group
//! or other bits, as `open(2)` reads them, root always); a queue is created only by a user who
//! may write the directory and could then open the file the server creates (owned by the
//! server's user, mode 0600: in practice the server's user and root); a queue is deleted only
//! by a user who may remove the name (`unlink(2)`'s rule, sticky directories included).
//! Supplementary groups are the user's groups in the group database (`getgrouplist`), which
//! may differ from a running process's own groups (`newgrp`, or groups changed since login).

use std::ffi::CStr;
use std::fs::Metadata;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

mod dead_letters;
mod held;
pub use dead_letters::{dead_letter_widens, has_acl};
pub use held::Held;

/// A user as the permission checks see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
    /// Every group the user is in (the primary one included).
    pub groups: Vec<u32>,
}

/// `S_ISVTX`: in a sticky directory only a file's owner, the directory's owner or root may
/// remove or rename the file.
const STICKY: u32 = 0o1000;

impl Identity {
    /// The user `uid` with the groups the group database gives it (only `uid` itself and no
    /// group if the user has no entry in the password database).
    pub fn of_uid(uid: u32) -> Identity {
        let mut buf = vec![0u8; 4096];
        // SAFETY: an all-zero `passwd` is a valid value of a plain C struct (null pointers,
        // zero ids); getpwuid_r fills it in.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        loop {
            // SAFETY: `pw`, `buf` (of `buf.len()` bytes) and `result` are valid for writes
            // for the whole call; the strings `pw` points to live in `buf`, which outlives
            // their use below.
            let rc = unsafe {
                libc::getpwuid_r(
                    uid,
                    &mut pw,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    &mut result,
                )
            };
            if rc == libc::ERANGE && buf.len() < 1 << 20 {
                buf.resize(buf.len() * 2, 0);
                continue;
            }
            break;
        }
        if result.is_null() {
            return Identity {
                uid,
                gid: u32::MAX,
                groups: Vec::new(),
            };
        }
        let gid = pw.pw_gid;
        // SAFETY: getpwuid_r succeeded, so `pw_name` points to a NUL-terminated string in
        // `buf`, alive and unchanged here.
        let name = unsafe { CStr::from_ptr(pw.pw_name) };
        let mut groups = vec![0 as libc::gid_t; 64];
        loop {
            let mut n = groups.len() as libc::c_int;
            // SAFETY: `name` is NUL-terminated; `groups` has room for `n` ids and `n` is
            // valid for reads and writes.
            let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
            if rc >= 0 {
                groups.truncate(n.max(0) as usize);
                break;
            }
            if groups.len() >= 1 << 16 {
                groups = vec![gid];
                break;
            }
            // -1: `n` now holds the count needed (glibc); grow to it, at least double.
            let want = (n.max(0) as usize).max(groups.len() * 2);
            groups.resize(want, 0);
        }
        Identity { uid, gid, groups }
    }

    /// This process's effective user and groups.
    pub fn of_this_process() -> Identity {
        // SAFETY: geteuid and getegid cannot fail and touch no memory of ours.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // SAFETY: a count query (size 0, null list) writes nothing.
        let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
        let mut groups = vec![0 as libc::gid_t; n.max(0) as usize];
        // SAFETY: `groups` has room for `groups.len()` ids.
        let got = unsafe { libc::getgroups(groups.len() as libc::c_int, groups.as_mut_ptr()) };
        groups.truncate(got.max(0) as usize);
        if !groups.contains(&gid) {
            groups.push(gid);
        }
        Identity { uid, gid, groups }
    }

    /// The mode's permission bits (`rwx` as 4, 2, 1) that apply to this user for a file or
    /// directory, as the kernel picks them: owner's, else group's, else other's.
    fn bits(&self, m: &Metadata) -> u32 {
        let mode = m.mode();
        if m.uid() == self.uid {
            (mode >> 6) & 7
        } else if m.gid() == self.gid || self.groups.contains(&m.gid()) {
            (mode >> 3) & 7
        } else {
            mode & 7
        }
    }

    /// Whether this user may open the file for reading and writing (as a queue is opened).
    pub fn may_open(&self, file: &Metadata) -> bool {
        self.uid == 0 || self.bits(file) & 6 == 6
    }

    /// Whether this user may search the directory (look a name up in it: execute).
    pub fn may_search(&self, dir: &Metadata) -> bool {
        self.uid == 0 || self.bits(dir) & 1 == 1
    }

    /// Whether this user may list the directory (read and search).
    pub fn may_list(&self, dir: &Metadata) -> bool {
        self.uid == 0 || self.bits(dir) & 5 == 5
    }

    /// Whether this user may make a new name in the directory (write and search).
    pub fn may_create_in(&self, dir: &Metadata) -> bool {
        self.uid == 0 || self.bits(dir) & 3 == 3
    }

    /// Whether this user may remove `file`'s name from `dir` (`unlink(2)`: write and search
    /// on the directory; in a sticky one, also owning the file or the directory).
    pub fn may_unlink(&self, dir: &Metadata, file: &Metadata) -> bool {
        self.uid == 0
            || (self.bits(dir) & 3 == 3
                && (dir.mode() & STICKY == 0 || file.uid() == self.uid || dir.uid() == self.uid))
    }
}

/// A directory as one request walked it from `/` (see [`walk`]): a descriptor of the
/// directory itself (`O_PATH`), whatever its path comes to name afterwards.
#[derive(Debug)]
pub struct Walked {
    fd: Arc<OwnedFd>,
    meta: Metadata,
}

/// What [`walk`] found.
#[derive(Debug)]
pub enum Reach {
    /// Every directory on the path searchable by the user: the last one, held open.
    Walked(Walked),
    /// A directory on the path the user may not search.
    NoSearch,
    /// The path no longer leads to a directory through directories alone: a component is
    /// gone, or is now a symbolic link or another kind of file (the reason says which,
    /// naming the server's paths: for its log, not for a client).
    Moved(String),
    /// A user other than the trusted ones could change where the path leads (the reason says
    /// how, naming the server's paths: for its log, not for a client).
    Exposed(String),
}

/// The most components [`walk`] opens (`PATH_MAX` allows 2,048 one-letter ones).
const MAX_COMPONENTS: usize = 2048;

/// `dir` (an absolute path with no symbolic link and no `..`: a caller resolves it once, as
/// `serve` does at start) walked as the kernel walks it for a process of `who` that opens a
/// name there: each component opened from the one above it (`O_PATH`, never through a
/// symbolic link), and `who`'s search permission checked on each directory as opened, `/`
/// and `dir` included.
///
/// What the request then does in the directory goes through the returned descriptor, so the
/// directories checked are the ones used: a component renamed, or swapped for a symbolic
/// link, after the check cannot take the request to a directory `who` may not search (a
/// path checked by name and then opened by name could, between the two).
///
/// A server also hands paths in `dir` to calls that open them later (a redrive policy's
/// dead-letter queue, a move task's destination), and those are not walked again. So, with
/// `trusted` (root and the server's own user), the path and the names in `dir` must be ones
/// no other user can change ([`exposed`]); where another user could, the walk says
/// [`Reach::Exposed`] and nothing is done there. Without, only search permission is asked
/// (a caller that checks what it opens by device and inode).
pub fn walk(who: &Identity, dir: &Path, trusted: Option<&[u32]>) -> io::Result<Reach> {
    walk_steps(who, dir, trusted).map(|(reach, _)| reach)
}

/// Each directory a walk opened, from `/`: its path and its (device, inode).
type Steps = Vec<(PathBuf, (u64, u64))>;

/// [`walk`], and the directories it opened (all of them where it says [`Reach::Walked`]).
fn walk_steps(who: &Identity, dir: &Path, trusted: Option<&[u32]>) -> io::Result<(Reach, Steps)> {
    if !dir.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not an absolute path", dir.display()),
        ));
    }
    let (mut here, mut meta) = with_meta(open_path(None, Path::new("/"), libc::O_DIRECTORY)?)?;
    let mut at = PathBuf::from("/");
    let mut steps = vec![(at.clone(), (meta.dev(), meta.ino()))];
    for (n, c) in dir.components().enumerate() {
        if n >= MAX_COMPONENTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the directory's path has too many components",
            ));
        }
        let c = match c {
            Component::RootDir => continue,
            Component::Normal(c) => c,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a resolved path", dir.display()),
                ))
            }
        };
        if !who.may_search(&meta) {
            return Ok((Reach::NoSearch, steps));
        }
        let child = at.join(c);
        let opened = open_path(
            Some(&here),
            Path::new(c),
            libc::O_DIRECTORY | libc::O_NOFOLLOW,
        );
        let (fd, child_meta) = match opened {
            Ok(fd) => with_meta(fd)?,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
                ) =>
            {
                return Ok((Reach::Moved(moved(&child)), steps))
            }
            Err(e) => return Err(e),
        };
        let ids = (meta.uid(), meta.mode());
        if let Some(why) =
            trusted.and_then(|t| exposed(&at, ids, Some((&child, child_meta.uid())), t))
        {
            return Ok((Reach::Exposed(why), steps));
        }
        steps.push((child.clone(), (child_meta.dev(), child_meta.ino())));
        (here, meta, at) = (fd, child_meta, child);
    }
    if !who.may_search(&meta) {
        return Ok((Reach::NoSearch, steps));
    }
    if let Some(why) = trusted.and_then(|t| exposed(&at, (meta.uid(), meta.mode()), None, t)) {
        return Ok((Reach::Exposed(why), steps));
    }
    let fd = Arc::new(here);
    Ok((Reach::Walked(Walked { fd, meta }), steps))
}

/// Why a walk found `path` moved.
fn moved(path: &Path) -> String {
    format!(
        "{} is gone, or is no longer a directory (a symbolic link is not followed: the path \
         was resolved when the server started)",
        path.display()
    )
}

/// Why a user outside `trusted` could make a name lead elsewhere, if one could: a name in the
/// directory `parent` (owner and mode `(uid, mode)`) that is `child` (a directory on the path,
/// with its owner), or, with `child` `None`, any name in it (the queues of the served
/// directory). Such a user is `parent`'s owner (who may change its mode and rename what it
/// holds); any user, where `parent` is writable by its group or by others and not sticky
/// (`rename(2)` needs only write on it); `child`'s owner, where `parent` is such a directory
/// with the sticky bit (as `/dev/shm`: there an entry's owner may still rename it). In a
/// sticky served directory a user may still rename their own queues, and link another's
/// file under a name of theirs where the kernel allows it (`fs.protected_hardlinks=0`).
pub fn exposed(
    parent: &Path,
    (uid, mode): (u32, u32),
    child: Option<(&Path, u32)>,
    trusted: &[u32],
) -> Option<String> {
    let what = match child {
        Some((c, _)) => format!(
            "rename {} or put another directory in its place",
            c.display()
        ),
        None => "rename one queue onto another's name (a dead-letter queue's, which serve \
                 opens by its name when it moves a message there)"
            .to_owned(),
    };
    if !trusted.contains(&uid) {
        return Some(format!(
            "{} is owned by uid {uid}, who could {what}",
            parent.display()
        ));
    }
    if mode & 0o022 != 0 {
        if mode & STICKY == 0 {
            return Some(format!(
                "{} may be written by its group or by every user (mode {:o}, no sticky bit): \
                 they could {what}",
                parent.display(),
                mode & 0o7777,
            ));
        }
        if let Some((c, owner)) = child.filter(|&(_, owner)| !trusted.contains(&owner)) {
            return Some(format!(
                "{} is owned by uid {owner} in a directory others may write ({}): its owner \
                 could rename it or put another directory in its place",
                c.display(),
                parent.display()
            ));
        }
    }
    None
}

/// A descriptor with its metadata (`fstat`).
fn with_meta(fd: OwnedFd) -> io::Result<(OwnedFd, Metadata)> {
    let f = std::fs::File::from(fd);
    let m = f.metadata()?;
    Ok((OwnedFd::from(f), m))
}

/// `openat(at or the working directory, path, O_PATH | O_CLOEXEC | flags)`.
fn open_path(at: Option<&OwnedFd>, path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    let at = at.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    // SAFETY: `c` is NUL-terminated and lives across the call; `at` is AT_FDCWD or a
    // descriptor we hold open.
    let fd = unsafe { libc::openat(at, c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC | flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Walked {
    /// The directory's metadata, as it was when walked.
    pub fn meta(&self) -> &Metadata {
        &self.meta
    }

    /// The metadata of the name `name` in the directory (never through a symbolic link: a
    /// symlink's own), or `None` if there is no such name.
    pub fn entry(&self, name: &str) -> io::Result<Option<Metadata>> {
        if name.contains('/') || name.is_empty() || name == "." || name == ".." {
            return Ok(None);
        }
        // One `statx` of `/proc/self/fd/N/NAME`: the kernel follows the descriptor's magic
        // link to the directory held, and not the name (`fstatat(N, NAME,
        // AT_SYMLINK_NOFOLLOW)`, where an `O_PATH` open, `fstat` and `close` took three).
        match std::fs::symlink_metadata(self.path(name)) {
            Ok(m) => Ok(Some(m)),
            // No such name, if the descriptor's link is there: without `/proc` (or with
            // another pid namespace's) every name would read as missing.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                match std::fs::symlink_metadata(self.dir_path()) {
                    Ok(_) => Ok(None),
                    Err(_) => Err(io::Error::other(format!(
                        "{PROC_FD} does not name this process's descriptors (is /proc \
                         mounted, for this pid namespace?): serve works in its directory \
                         through them"
                    ))),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// A path to `name` in this directory for calls that take paths (the library's), valid
    /// while `self` lives: `/proc/self/fd/N/NAME`, whose `N` is this descriptor, so the
    /// kernel looks `name` up in the directory walked whatever its path names now.
    pub fn path(&self, name: &str) -> PathBuf {
        debug_assert!(
            !name.contains('/') && !name.is_empty(),
            "a name, not a path: {name}"
        );
        self.dir_path().join(name)
    }

    /// The directory itself as a path (`/proc/self/fd/N`), for listing it.
    pub fn dir_path(&self) -> PathBuf {
        PathBuf::from(format!("{PROC_FD}{}", self.fd.as_raw_fd()))
    }
}

/// The prefix of [`Walked::path`]'s paths (error texts strip it: [`strip_walked_paths`]).
pub const PROC_FD: &str = "/proc/self/fd/";

/// `text` with every [`Walked::path`] prefix (`/proc/self/fd/N/`) taken out, leaving the
/// names (a descriptor's path without a name after it stays): what a client reads in an
/// error from a call made through a walked directory.
pub fn strip_walked_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(PROC_FD) {
        out.push_str(&rest[..i]);
        let after = &rest[i + PROC_FD.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with('/') {
            rest = &after[digits + 1..];
        } else {
            out.push_str(PROC_FD);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `a` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) written as the IPv4 address it is.
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// Whether a peer's address is a loopback one (IPv4-mapped included).
pub fn is_loopback(a: SocketAddr) -> bool {
    canonical(a).ip().is_loopback()
}

/// One `ADDR:PORT` of `/proc/net/tcp{,6}`: the address as 32-bit words printed in the
/// machine's byte order, the port in hexadecimal.
fn proc_addr(s: &str) -> Option<SocketAddr> {
    let (a, p) = s.split_once(':')?;
    let port = u16::from_str_radix(p, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(a.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match a.len() {
        8 => IpAddr::from(word(0)?),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

/// The uid in the socket table `text` (the contents of `/proc/net/tcp` or `tcp6`) of the
/// socket whose local address is `client` and whose remote address is `server`, if a process
/// still holds it open.
///
/// A socket its process has closed stays in the table for a while (FIN_WAIT2, TIME_WAIT),
/// listed with uid 0 and inode 0: it belongs to no file any more, and the kernel has no owner
/// to print. Such an entry names nobody (`None`), never root: otherwise a client that sends a
/// request and closes at once would act as root whenever the lookup comes after its close.
pub fn uid_in_table(text: &str, client: SocketAddr, server: SocketAddr) -> Option<u32> {
    entry_in_table(text, client, server).map(|(uid, _)| uid)
}

/// [`uid_in_table`]'s entry: its uid and its (non-zero) inode.
fn entry_in_table(text: &str, client: SocketAddr, server: SocketAddr) -> Option<(u32, u64)> {
    let (client, server) = (canonical(client), canonical(server));
    text.lines().skip(1).find_map(|line| {
        // sl, local, remote, state, tx:rx, tr:when, retransmits, uid, timeout, inode.
        let f: Vec<&str> = line.split_whitespace().take(10).collect();
        if f.len() < 10 {
            return None;
        }
        if proc_addr(f[1])? != client || proc_addr(f[2])? != server {
            return None;
        }
        let inode: u64 = f[9].parse().ok()?;
        if inode == 0 {
            return None; // closed: no owner (see above)
        }
        Some((f[7].parse().ok()?, inode))
    })
}

/// The uid that owns the TCP socket at `client` connected to this server's `server` address
/// (both on this host), from `/proc/net/tcp` and `/proc/net/tcp6`; `None` if neither lists it
/// (the client has gone, or it is not on this host).
pub fn peer_uid(client: SocketAddr, server: SocketAddr) -> io::Result<Option<u32>> {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some((uid, inode)) = entry_in_table(&text, client, server) {
            // The kernel prints an entry's uid and inode as two separate reads, in no fixed
            // order, and a close in between (the socket orphaned: uid 0, inode 0 after it)
            // can pair root's 0 with the live inode. A second reading that still shows the
            // socket's inode was made before any close, and so after the first one's uid.
            let again = std::fs::read_to_string(table)?;
            return Ok(match entry_in_table(&again, client, server) {
                Some((_, i)) if i == inode => Some(uid),
                _ => None,
            });
        }
    }
    Ok(None)
}

/// [`peer_uid`], then `then` of the uid, on a blocking thread, at most `turns` of them at once
/// and within `within` (its turn included): `None` if the socket is not found, or not in time.
/// The turn goes with the blocking work, which the timeout does not stop, so at most as many
/// run as `turns` allows, timed out or not. `then` is where a uid becomes an [`Identity`]
/// (`Identity::of_uid`: the user and group databases, which NSS may answer from the network,
/// slowly; it ran on the async worker).
pub async fn peer_uid_bounded<T: Send + 'static>(
    turns: &'static tokio::sync::Semaphore,
    within: std::time::Duration,
    client: SocketAddr,
    server: SocketAddr,
    then: fn(u32) -> T,
) -> Option<T> {
    let lookup = async {
        // Never closed, so `acquire` only waits.
        let turn = turns.acquire().await.ok()?;
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            peer_uid(client, server).ok().flatten().map(then)
        })
        .await
        .ok()
        .flatten()
    };
    tokio::time::timeout(within, lookup).await.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_tables_are_read_as_the_kernel_writes_them() {
        // 127.0.0.1:40000 -> 127.0.0.1:9324 owned by uid 1000, and the server's side (uid 0).
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:246C 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n\
   1: 0100007F:9C40 0100007F:246C 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0 20 4 30 10 -1\n\
   2: 0100007F:246C 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1\n";
        let client: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let server: SocketAddr = "127.0.0.1:9324".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(uid_in_table(v4, client, server), Some(1000));
            assert_eq!(uid_in_table(v4, server, client), Some(0));
            // An IPv4-mapped client address finds the same entry.
            let mapped: SocketAddr = "[::ffff:127.0.0.1]:40000".parse().unwrap();
            assert_eq!(uid_in_table(v4, mapped, server), Some(1000));
            // ::1 in tcp6.
            let v6 = "header\n   0: 00000000000000000000000001000000:9C40 00000000000000000000000001000000:246C 01 0:0 0:0 0 1234 0 5\n";
            let c6: SocketAddr = "[::1]:40000".parse().unwrap();
            let s6: SocketAddr = "[::1]:9324".parse().unwrap();
            assert_eq!(uid_in_table(v6, c6, s6), Some(1234));
        }
        assert_eq!(
            uid_in_table(v4, client, "127.0.0.1:1".parse().unwrap()),
            None
        );
        // The client's socket after its close (FIN_WAIT2, then TIME_WAIT): uid 0 and inode 0
        // in the table, and nobody's, not root's.
        if cfg!(target_endian = "little") {
            for st in ["05", "06"] {
                let closed = format!(
                    "header\n   1: 0100007F:9C40 0100007F:246C {st} 00000000:00000000 00:00000000 00000000     0        0 0 1 0 20 4 30 10 -1\n"
                );
                assert_eq!(uid_in_table(&closed, client, server), None, "state {st}");
            }
            // A root client's open socket is root's.
            let root = "header\n   1: 0100007F:9C40 0100007F:246C 01 00000000:00000000 00:00000000 00000000     0        0 77 1 0 20 4 30 10 -1\n";
            assert_eq!(uid_in_table(root, client, server), Some(0));
        }
        assert_eq!(
            uid_in_table("header\n garbage line\n 0: zz:zz", client, server),
            None
        );
    }

    /// A live connection's owner is this process's user.
    #[test]
    fn a_loopback_peer_is_found_with_its_uid() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(server).unwrap();
        let (_s, client) = l.accept().unwrap();
        assert_eq!(c.local_addr().unwrap(), client);
        let me = Identity::of_this_process();
        assert_eq!(peer_uid(client, server).unwrap(), Some(me.uid));
    }

    /// A client that closed its socket (the server's end still open) is nobody: the kernel
    /// lists the closed socket with uid 0, and taking that for its owner would make any local
    /// user root (send a request, close at once, and win the race with the lookup).
    #[test]
    fn a_peer_that_closed_its_socket_is_nobody_not_root() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = l.local_addr().unwrap();
        let c = std::net::TcpStream::connect(server).unwrap();
        let (_s, client) = l.accept().unwrap();
        drop(c);
        // The close moves the client's socket to FIN_WAIT2 at once on loopback; wait for the
        // table to show it (never more than a few milliseconds).
        for _ in 0..200 {
            let text = std::fs::read_to_string("/proc/net/tcp").unwrap();
            let closed = text.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 9 && proc_addr(f[1]) == Some(client) && f[9] == "0"
            });
            if closed {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(peer_uid(client, server).unwrap(), None);
    }

    /// What a walk answered, comparable: the directory it works in (device, inode, read
    /// through its descriptor) or the reason.
    fn summary(r: &Reach) -> String {
        match r {
            Reach::Walked(w) => {
                let m = std::fs::metadata(w.dir_path()).unwrap();
                assert_eq!((m.dev(), m.ino()), (w.meta().dev(), w.meta().ino()));
                format!("walked {} {}", m.dev(), m.ino())
            }
            Reach::NoSearch => "no search".to_owned(),
            Reach::Moved(why) => format!("moved: {why}"),
            Reach::Exposed(why) => format!("exposed: {why}"),
        }
    }

    #[test]
    fn a_walk_checks_and_holds_the_directories_it_opens() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("shmfifo-serve-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("a").join("b");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("q.fifo"), b"x").unwrap();
        std::os::unix::fs::symlink("q.fifo", dir.join("link.fifo")).unwrap();
        let me = Identity::of_this_process();
        let t = [0, me.uid];
        // Every answer of a walk with `t` trusted is also a held walk's, its directories held
        // from one call to the next (a walk again only where the path no longer names them).
        let held = Held::new(dir.clone(), t.to_vec());
        let both = |who: &Identity| {
            let (walked, from_held) = (walk(who, &dir, Some(&t)).unwrap(), held.walk(who).unwrap());
            assert_eq!(summary(&walked), summary(&from_held));
            from_held
        };
        let Reach::Walked(w) = both(&me) else {
            panic!("not walked")
        };
        // Held: the directory the first held walk opened is the next one's, not opened again.
        let Reach::Walked(h) = held.walk(&me).unwrap() else {
            panic!("not walked")
        };
        assert!(
            matches!(held.walk(&me).unwrap(), Reach::Walked(again) if again.dir_path() == h.dir_path())
        );
        assert!(w.meta().is_dir());
        assert!(w.entry("q.fifo").unwrap().unwrap().is_file());
        // A symlink is its own entry, never followed; a missing name is none; no `..`.
        assert!(w
            .entry("link.fifo")
            .unwrap()
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(w.entry("none.fifo").unwrap().is_none());
        assert!(w.entry("..").unwrap().is_none() && w.entry("a/b").unwrap().is_none());
        // The walked directory is used whatever its path names now; a held walk holds the
        // directory the path names now (an empty one), never the one moved away.
        std::fs::rename(base.join("a"), base.join("moved")).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        assert!(w.entry("q.fifo").unwrap().is_some());
        assert!(h.entry("q.fifo").unwrap().is_some());
        let Reach::Walked(now) = both(&me) else {
            panic!("not walked")
        };
        assert!(now.entry("q.fifo").unwrap().is_none());
        let Reach::Walked(now) = held.walk(&me).unwrap() else {
            panic!("not walked")
        };
        assert!(now.entry("q.fifo").unwrap().is_none() && now.dir_path() != h.dir_path());
        // The first directory back: walked again, the held walk in it too.
        std::fs::remove_dir_all(base.join("a")).unwrap();
        std::fs::rename(base.join("moved"), base.join("a")).unwrap();
        let Reach::Walked(back) = both(&me) else {
            panic!("not walked")
        };
        assert!(back.entry("q.fifo").unwrap().is_some());
        // Only the last directory swapped (its parent the same): the held one is not served.
        std::fs::rename(&dir, base.join("a").join("b.old")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        let Reach::Walked(fresh) = both(&me) else {
            panic!("not walked")
        };
        assert!(fresh.entry("q.fifo").unwrap().is_none());
        std::fs::remove_dir(&dir).unwrap();
        std::fs::rename(base.join("a").join("b.old"), &dir).unwrap();
        assert!(
            matches!(held.walk(&me).unwrap(), Reach::Walked(w) if w.entry("q.fifo").unwrap().is_some())
        );
        std::fs::rename(base.join("a"), base.join("moved")).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(std::fs::read(w.path("q.fifo")).unwrap(), b"x");
        assert!(std::fs::read_dir(w.dir_path()).unwrap().count() == 2);
        // A component now a symlink is not followed.
        std::fs::remove_dir_all(base.join("a")).unwrap();
        std::os::unix::fs::symlink(base.join("moved"), base.join("a")).unwrap();
        assert!(
            matches!(both(&me), Reach::Moved(why) if why.starts_with(&*base.join("a").to_string_lossy()))
        );
        std::fs::remove_file(base.join("a")).unwrap();
        assert!(matches!(both(&me), Reach::Moved(_)));
        // A directory on the path another user may not search.
        std::fs::rename(base.join("moved"), base.join("a")).unwrap();
        let other = Identity {
            uid: me.uid.wrapping_add(12345),
            gid: u32::MAX - 1,
            groups: vec![],
        };
        std::fs::set_permissions(base.join("a"), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(matches!(both(&other), Reach::NoSearch));
        std::fs::set_permissions(base.join("a"), std::fs::Permissions::from_mode(0o711)).unwrap();
        assert!(matches!(both(&other), Reach::Walked(_)));
        assert!(walk(&me, Path::new("relative"), Some(&t)).is_err());
        // A directory on the path another user could change: its owner untrusted, or
        // writable by others without the sticky bit; with it, its entry's owner is asked.
        assert!(
            matches!(walk(&me, &dir, Some(&[me.uid.wrapping_add(12345)])).unwrap(), Reach::Exposed(why) if why.starts_with("/ is owned by uid 0"))
        );
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(both(&me), Reach::Exposed(why) if why.contains("no sticky bit")));
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(matches!(both(&me), Reach::Walked(_)));
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(walk(&me, &base.join("a/../a/b"), Some(&t)).is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }

    /// Who could change where a name leads, by the parent's owner and mode and the child's
    /// owner (root 0 and the server's user 7 trusted; 9 another user).
    #[test]
    fn a_name_others_could_move_is_exposed() {
        let t = [0, 7];
        let (p, c) = (Path::new("/p"), Path::new("/p/c"));
        for (parent, child, exposed_by) in [
            ((0, 0o755), Some(9), None), // root's, not writable by others
            ((7, 0o700), Some(7), None), // the server's
            ((9, 0o755), Some(0), Some("owned by uid 9")), // another user's
            ((0, 0o775), Some(0), Some("no sticky bit")), // its group may write
            ((0, 0o757), Some(0), Some("no sticky bit")), // everyone may write
            ((0, 0o1777), Some(7), None), // sticky, the child ours
            ((0, 0o1777), Some(9), Some("owned by uid 9 in")), // sticky, the child another's
            ((0, 0o1777), None, None),   // the served directory: sticky
            ((0, 0o777), None, Some("rename one queue onto")), // ... not sticky
            ((9, 0o700), None, Some("owned by uid 9")), // ... another user's
        ] {
            let why = exposed(p, parent, child.map(|o| (c, o)), &t);
            match exposed_by {
                None => assert_eq!(why, None, "{parent:?} {child:?}"),
                Some(w) => assert!(
                    why.as_ref().is_some_and(|y| y.contains(w)),
                    "{parent:?} {child:?}: {why:?}"
                ),
            }
        }
    }

    #[test]
    fn walked_paths_are_stripped_to_names() {
        assert_eq!(
            strip_walked_paths("queue /proc/self/fd/17/a.fifo and /proc/self/fd/3/b.fifo"),
            "queue a.fifo and b.fifo"
        );
        assert_eq!(
            strip_walked_paths("in /proc/self/fd/9: gone"),
            "in /proc/self/fd/9: gone"
        );
        assert_eq!(strip_walked_paths("/proc/self/fd/x"), "/proc/self/fd/x");
        assert_eq!(strip_walked_paths("no path"), "no path");
    }

    #[test]
    fn permission_bits_as_open_reads_them() {
        let dir = std::env::temp_dir().join(format!("shmfifo-serve-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("q.fifo");
        std::fs::write(&f, b"").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let me = Identity::of_this_process();
        let other = Identity {
            uid: me.uid.wrapping_add(12345),
            gid: u32::MAX - 1,
            groups: vec![],
        };
        let group_member = Identity {
            groups: vec![std::fs::metadata(&f).unwrap().gid()],
            ..other.clone()
        };
        for (mode, mine, theirs, group) in [
            (0o600, true, false, false),
            (0o660, true, false, true),
            (0o666, true, true, true),
            (0o644, true, false, false),
            (0o400, false, false, false),
        ] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let m = std::fs::metadata(&f).unwrap();
            assert_eq!(me.may_open(&m), mine || me.uid == 0, "{mode:o} owner");
            assert_eq!(other.may_open(&m), theirs, "{mode:o} other");
            assert_eq!(group_member.may_open(&m), group, "{mode:o} group");
        }
        // A sticky world-writable directory (as /dev/shm): others may create, not remove.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let d = std::fs::metadata(&dir).unwrap();
        let m = std::fs::metadata(&f).unwrap();
        assert!(other.may_create_in(&d) && other.may_list(&d));
        assert!(!other.may_unlink(&d, &m));
        assert!(me.may_unlink(&d, &m));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = std::fs::metadata(&dir).unwrap();
        assert!(!other.may_create_in(&d) && !other.may_unlink(&d, &m));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
