//! The queues this server keeps open (a name's handle, shared by the names of one file, at
//! most [`MAX_OPEN_QUEUES`] names, the least recently used dropped to make room), and the
//! checks every request passes before it touches one: the name a regular file of the
//! directory, the caller's search permission on the directory, read and write on the file,
//! and errors that name queues, not the server's paths.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};
use shmfifo::{AsyncQueue, DeadLetterCheck, Queue};

use super::{access_denied, no_such_queue, required, valid_name, Queues};
use crate::access::{Identity, Reach, Walked};
use crate::protocol::ApiError;

/// An open queue and the file it has open (device, inode): when the name comes to name
/// another file (the queue deleted and created again), the queue is opened anew.
#[derive(Debug)]
pub(super) struct Opened {
    pub(super) queue: AsyncQueue,
    pub(super) file: (u64, u64),
    /// When it was last used (the table's own clock, [`Queues::tick`]): the least recently
    /// used name is the one dropped to make room.
    pub(super) used: u64,
}

/// The most queue names this server keeps open at once. An open queue holds two descriptors
/// and a participant slot of its queue; names of one file (hard links) share one handle. The
/// default connection limit leaves 64 descriptors and two for each of these
/// (`conn::default_max_connections`). Past the bound the name used least recently is dropped
/// from the table to make room ([`make_room`]), and opened again when next used; a request
/// still using a dropped name's handle (a long poll, a move task) keeps it until it ends.
pub(crate) const MAX_OPEN_QUEUES: usize = 64;

/// Makes room in the open queue table for one more name: at [`MAX_OPEN_QUEUES`] names, the one
/// used least recently is dropped. Links to one file share its handle, so a flood of names
/// costs reopening, not descriptors or participant slots beyond the bound and what requests
/// in flight hold.
pub(super) fn make_room(open: &mut HashMap<String, Opened>) {
    while open.len() >= MAX_OPEN_QUEUES {
        let Some(victim) = open
            .iter()
            .min_by_key(|(_, o)| o.used)
            .map(|(k, _)| k.clone())
        else {
            return;
        };
        open.remove(&victim);
    }
}

/// The check of every dead-letter move of a queue this server opens
/// ([`Queue::set_dead_letter_check`]). A redrive policy lives in the queue's shared file:
/// any user who may open the file may write any path there (through the library, not only
/// through this server), and a receive through the server would then move messages with the
/// server's rights. So a move goes only to a queue of the served directory `dir` (a regular
/// file under a queue name, the one the library opened), and only where every user who may
/// open the source may open the dead-letter queue too ([`crate::access::dead_letter_widens`]).
/// Refused, the messages stay in the source, received, and the receive answers why.
fn dead_letters_within(dir: PathBuf) -> Arc<DeadLetterCheck> {
    Arc::new(move |source: &Queue, path: &Path, target: Option<&Queue>| {
        // Before the path is opened at all (a path a user wrote: a device there must not be
        // opened by the server), then with the queue opened.
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(valid_name);
        if path.parent() != Some(dir.as_path()) || !named {
            return Err("it is not a queue of the served directory".into());
        }
        // The directory's path is one only root and the server's user can change (checked
        // at start and at each request): the name, looked at without following it, is a
        // regular file, and then the file the library opened, or the move is not made.
        let on_disk = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_file() => m,
            // Most often a dead-letter queue deleted while a policy still names it: say so
            // (it read as a failed security check).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(
                    "it does not exist (deleted?): create it, or change this queue's \
                            RedrivePolicy"
                        .into(),
                )
            }
            _ => return Err("it is not a queue file of the served directory".into()),
        };
        let Some(target) = target else {
            return Ok(());
        };
        let opened = target.file_metadata().map_err(|e| e.to_string())?;
        if (on_disk.dev(), on_disk.ino()) != (opened.dev(), opened.ino()) {
            return Err("its name no longer names the queue opened".into());
        }
        let from = source.file_metadata().map_err(|e| e.to_string())?;
        if (from.dev(), from.ino()) == (opened.dev(), opened.ino()) {
            return Err("a queue cannot be its own dead-letter queue".into());
        }
        // An access control list widens a file past its mode bits (the group bits are then
        // its mask): the rule below reads the bits only, so such files are not moved between.
        for (p, what) in [
            (source.path(), "this queue"),
            (Some(path), "the dead-letter queue"),
        ] {
            if p.is_some_and(crate::access::has_acl) {
                return Err(format!(
                    "{what} has an access control list, which serve does not read"
                ));
            }
        }
        match crate::access::dead_letter_widens(&from, &opened) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    })
}

impl Queues {
    /// The metadata of the name `name` in the directory as `dir` walked it, if it is a
    /// regular file (never through a symlink).
    pub(super) fn file_of(&self, dir: &Walked, name: &str) -> Result<std::fs::Metadata, ApiError> {
        if !valid_name(name) {
            return Err(no_such_queue());
        }
        match dir.entry(name) {
            Ok(Some(m)) if m.file_type().is_file() => Ok(m),
            Ok(_) => {
                self.open.lock().expect("queue table").remove(name);
                Err(no_such_queue())
            }
            Err(e) => Err(ApiError::from(shmfifo::Error::Io(e))),
        }
    }

    /// The queue `name` for `who`, who must be allowed to open its file for reading and
    /// writing. Opened on first use and kept while the name names the same file: a queue
    /// deleted and created again under the name is opened anew (the old handle would serve
    /// the deleted queue).
    pub(super) fn queue_by_name(&self, name: &str, who: &Identity) -> Result<AsyncQueue, ApiError> {
        // A name that comes to name another file between the check and the open (a queue
        // deleted and created again, or a directory swapped under us) is looked at again;
        // a name that keeps changing is an error.
        for _ in 0..3 {
            if let Some(q) = self.queue_once(name, who)? {
                return Ok(q);
            }
        }
        Err(ApiError::from(shmfifo::Error::Io(std::io::Error::other(
            format!("the queue file {name} kept being replaced while it was opened; try again"),
        ))))
    }

    /// One try of [`queue_by_name`](Self::queue_by_name): `None` if the file opened is not
    /// the one checked.
    fn queue_once(&self, name: &str, who: &Identity) -> Result<Option<AsyncQueue>, ApiError> {
        let dir = self.reachable(name, who)?;
        let meta = self.file_of(&dir, name)?;
        if !who.may_open(&meta) {
            return Err(access_denied(name, "open it for reading and writing"));
        }
        let id = (meta.dev(), meta.ino());
        {
            let mut open = self.open.lock().expect("queue table");
            let now = self.tick();
            match open.get_mut(name) {
                Some(o) if o.file == id => {
                    o.used = now;
                    return Ok(Some(o.queue.clone()));
                }
                Some(_) => {
                    tracing::info!(queue = name, "the queue file was replaced; reopening it");
                    open.remove(name);
                }
                None => {}
            }
            // Another name of the same file (a hard link): its handle serves this name too,
            // so that links cost no descriptors and no participant slots of the queue.
            if let Some(q) = open
                .values()
                .find(|o| o.file == id)
                .map(|o| o.queue.clone())
            {
                make_room(&mut open);
                open.insert(
                    name.to_owned(),
                    Opened {
                        queue: q.clone(),
                        file: id,
                        used: now,
                    },
                );
                return Ok(Some(q));
            }
        }
        // Opened by its path (the library's log lines name the queue by it), then checked to
        // be the file looked at in the directory as walked: a component of the path swapped
        // between the two (for a symlink to a directory `who` may not search) makes this
        // another file, not served.
        let q = Queue::open_at(self.path(name))?;
        let m = q.file_metadata()?;
        if (m.dev(), m.ino()) != id {
            return Ok(None);
        }
        q.set_dead_letter_check(dead_letters_within(self.dir.clone()));
        let opened = Opened {
            queue: AsyncQueue::new(q),
            file: (m.dev(), m.ino()),
            used: self.tick(),
        };
        let mut open = self.open.lock().expect("queue table");
        // What another request put under the name meanwhile serves us only if it is the file
        // this request checked; otherwise ours, checked, takes its place.
        if let Some(o) = open.get(name).filter(|o| o.file == opened.file) {
            return Ok(Some(o.queue.clone()));
        }
        if !open.contains_key(name) {
            make_room(&mut open);
        }
        let q = opened.queue.clone();
        open.insert(name.to_owned(), opened);
        Ok(Some(q))
    }

    /// The open table's next instant (for [`Opened::used`]).
    pub(super) fn tick(&self) -> u64 {
        // Relaxed: a counter; the table's lock orders what is read of it.
        self.ticks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The directory walked for `who` ([`crate::access::walk`], from the directories held
    /// since the last walk: [`crate::access::Held`]): search permission on it and
    /// on every directory above it, as the kernel asks of a process that opens a path there
    /// (a queue of mode 0666 in a directory of mode 0700 is its owner's alone), checked on
    /// the directories the request then uses. A path that has come to lead elsewhere, or that
    /// another user could now change (its directories' owners or modes changed since the
    /// server started, which checked them), serves nothing: the client reads a 500 that names
    /// no path, the log says why (once until the path is whole again).
    pub(super) fn reachable(&self, name: &str, who: &Identity) -> Result<Walked, ApiError> {
        let why = match self.held.walk(who) {
            Ok(Reach::Walked(w)) => {
                // Relaxed: a flag that only limits log lines (loaded first: a request on a
                // whole path writes nothing shared).
                if self.path_broken.load(std::sync::atomic::Ordering::Relaxed)
                    && self
                        .path_broken
                        .swap(false, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::info!(dir = %self.dir.display(), "the queue directory's path is served again");
                }
                return Ok(w);
            }
            Ok(Reach::NoSearch) => {
                return Err(access_denied(name, "search the directory that holds it"))
            }
            Ok(Reach::Moved(why) | Reach::Exposed(why)) => why,
            Err(e) => return Err(ApiError::from(shmfifo::Error::Io(e))),
        };
        // Relaxed: as above.
        if !self
            .path_broken
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::error!(
                dir = %self.dir.display(),
                why,
                "the queue directory's path cannot be served; every request fails until it is mended"
            );
        }
        Err(ApiError::from(shmfifo::Error::Io(std::io::Error::other(
            "the queue directory's path changed since the server started, and is not served \
             until it is mended (the server's log says how)",
        ))))
    }

    pub(super) fn queue(
        &self,
        p: &Map<String, Value>,
        who: &Identity,
    ) -> Result<(String, AsyncQueue), ApiError> {
        let name = self.name_of(required(p, "QueueUrl")?)?;
        let q = self.queue_by_name(&name, who)?;
        Ok((name, q))
    }

    /// An error as a client reads it: the server's directory taken out of its text, so that a
    /// queue file is named by its queue's name (the library's errors name files by path: an
    /// untrusted file, a damaged arena, a dead-letter queue refused, an I/O error). A client
    /// knows the names; where the server keeps them is not theirs to learn.
    pub(super) fn scrubbed(&self, mut e: ApiError) -> ApiError {
        e.message = crate::access::strip_walked_paths(&e.message);
        let dir = self.dir.display().to_string();
        if !dir.is_empty() && dir != "/" && e.message.contains(&dir) {
            e.message = e
                .message
                .replace(&format!("{dir}/"), "")
                .replace(&dir, "the queue directory");
        }
        e
    }
}
