//! [`Held`]: a served directory's walk kept between requests (see its doc).

use std::fs::Metadata;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{exposed, walk_steps, Identity, Reach, Steps, Walked};

/// A served directory walked once and held between requests: [`walk`](super::walk)'s answer
/// for each request at a fraction of its system calls.
///
/// A walk opens every directory on the path, checks it and closes it again: on a path of
/// four directories, nine system calls a request more than a check by name (16 → 25 a
/// GetQueueUrl). With the path's owners and modes checked ([`exposed`], as `serve` requires
/// of its directory), only root and the server's user can change where the path leads; so
/// the directories one walk opened are held, and each request looks at their paths by name
/// (`lstat`, no symbolic link followed, one a directory) for what the walk asked: each still
/// the directory held (device and inode), searchable by the caller, not exposed, as it is
/// now (its owner and mode read afresh). The request then works in the directory held, as
/// after a walk. A path that no longer names the directories held (a component renamed,
/// removed, or swapped for a symbolic link or another directory) is walked again from `/`,
/// and what that walk finds is held instead.
#[derive(Debug)]
pub struct Held {
    dir: PathBuf,
    trusted: Vec<u32>,
    last: Mutex<Option<Arc<HeldSteps>>>,
}

/// What [`Held`] holds: the directories of one complete walk, and the last one open.
#[derive(Debug)]
struct HeldSteps {
    steps: Steps,
    fd: Arc<OwnedFd>,
}

impl Held {
    /// `dir` (absolute, resolved, as [`walk`](super::walk) takes it), to be served with
    /// `trusted` the users who may change its path (root and the server's user). Nothing is
    /// walked yet.
    pub fn new(dir: PathBuf, trusted: Vec<u32>) -> Held {
        Held {
            dir,
            trusted,
            last: Mutex::new(None),
        }
    }

    /// What [`walk`](super::walk)`(who, dir, Some(trusted))` would answer now: from the directories
    /// held, or, where the path no longer names them, from a new walk (held where it gets
    /// to the directory).
    pub fn walk(&self, who: &Identity) -> io::Result<Reach> {
        let held = self.last.lock().expect("held walk").clone();
        if let Some(reach) = held.as_ref().and_then(|h| h.recheck(who, &self.trusted)) {
            return Ok(reach);
        }
        let (reach, steps) = walk_steps(who, &self.dir, Some(&self.trusted))?;
        // What this walk found replaces what it found stale, and only that: a request that
        // walked at the same time may already hold a newer walk's directories (a walk that
        // did not get to the directory holds nothing new, and what is held is checked again
        // at each use).
        let mut last = self.last.lock().expect("held walk");
        let unchanged = match (&*last, &held) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if unchanged {
            *last = match &reach {
                Reach::Walked(w) => Some(Arc::new(HeldSteps {
                    steps,
                    fd: w.fd.clone(),
                })),
                _ => None,
            };
        }
        Ok(reach)
    }
}

impl HeldSteps {
    /// The walk's answer for `who` from the directories held, or `None` where the path no
    /// longer names them, or cannot be looked at (each looked at by name: one `lstat` a
    /// directory; a walk then says why).
    fn recheck(&self, who: &Identity, trusted: &[u32]) -> Option<Reach> {
        let mut parent: Option<(&Path, Metadata)> = None;
        for (path, id) in &self.steps {
            // The last component not followed; the ones before it were each a directory
            // held when looked at just before (a concurrent change of the path is root's or
            // the server's user's: a request then serves the directories as held, or walks).
            let meta = std::fs::symlink_metadata(path).ok()?;
            if !meta.is_dir() || (meta.dev(), meta.ino()) != *id {
                return None;
            }
            if let Some((at, up)) = &parent {
                if !who.may_search(up) {
                    return Some(Reach::NoSearch);
                }
                let child = Some((path.as_path(), meta.uid()));
                if let Some(why) = exposed(at, (up.uid(), up.mode()), child, trusted) {
                    return Some(Reach::Exposed(why));
                }
            }
            parent = Some((path, meta));
        }
        let (at, meta) = parent?;
        if !who.may_search(&meta) {
            return Some(Reach::NoSearch);
        }
        if let Some(why) = exposed(at, (meta.uid(), meta.mode()), None, trusted) {
            return Some(Reach::Exposed(why));
        }
        Some(Reach::Walked(Walked {
            fd: self.fd.clone(),
            meta,
        }))
    }
}
