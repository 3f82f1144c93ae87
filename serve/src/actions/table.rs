//! The queues this server keeps open (a name's handle, shared by the names of one file, at
//! most [`MAX_OPEN_QUEUES`] names, the least recently used dropped to make room), and the
//! checks every request passes before it touches one: the name a regular file of the
//! directory, the caller's search permission on the directory, read and write on the file,
//! and errors that name queues, not the server's paths.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use serde_json::{Map, Value};
use shmfifo::{AsyncQueue, Queue};

use super::{access_denied, no_such_queue, required, valid_name, Queues};
use crate::access::Identity;
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

impl Queues {
    /// The metadata of the name `name` in the directory, if it is a regular file (never
    /// through a symlink).
    pub(super) fn file_of(&self, name: &str) -> Result<std::fs::Metadata, ApiError> {
        if !valid_name(name) {
            return Err(no_such_queue());
        }
        match std::fs::symlink_metadata(self.path(name)) {
            Ok(m) if m.file_type().is_file() => Ok(m),
            _ => {
                self.open.lock().expect("queue table").remove(name);
                Err(no_such_queue())
            }
        }
    }

    pub(super) fn dir_meta(&self) -> Result<std::fs::Metadata, ApiError> {
        std::fs::metadata(&self.dir).map_err(|e| ApiError::from(shmfifo::Error::Io(e)))
    }

    /// The queue `name` for `who`, who must be allowed to open its file for reading and
    /// writing. Opened on first use and kept while the name names the same file: a queue
    /// deleted and created again under the name is opened anew (the old handle would serve
    /// the deleted queue).
    pub(super) fn queue_by_name(&self, name: &str, who: &Identity) -> Result<AsyncQueue, ApiError> {
        self.reachable(name, who)?;
        let meta = self.file_of(name)?;
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
                    return Ok(o.queue.clone());
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
                return Ok(q);
            }
        }
        let q = Queue::open_at(self.path(name))?;
        // Checked again on the file as opened: the name may have changed since it was looked at.
        let m = q.file_metadata()?;
        if !who.may_open(&m) {
            return Err(access_denied(name, "open it for reading and writing"));
        }
        let opened = Opened {
            queue: AsyncQueue::new(q),
            file: (m.dev(), m.ino()),
            used: self.tick(),
        };
        let mut open = self.open.lock().expect("queue table");
        // What another request put under the name meanwhile serves us only if it is the file
        // this request checked; otherwise ours, checked, takes its place.
        if let Some(o) = open.get(name).filter(|o| o.file == opened.file) {
            return Ok(o.queue.clone());
        }
        if !open.contains_key(name) {
            make_room(&mut open);
        }
        let q = opened.queue.clone();
        open.insert(name.to_owned(), opened);
        Ok(q)
    }

    /// The open table's next instant (for [`Opened::used`]).
    pub(super) fn tick(&self) -> u64 {
        // Relaxed: a counter; the table's lock orders what is read of it.
        self.ticks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether `who` may reach names in the directory at all: search permission on it and
    /// on every directory above it, as the kernel asks of a process that opens a path there
    /// (a queue of mode 0666 in a directory of mode 0700 is its owner's alone).
    pub(super) fn reachable(&self, name: &str, who: &Identity) -> Result<(), ApiError> {
        match crate::access::reaches(who, &self.dir) {
            Ok(true) => Ok(()),
            Ok(false) => Err(access_denied(name, "search the directory that holds it")),
            Err(e) => Err(ApiError::from(shmfifo::Error::Io(e))),
        }
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
        let dir = self.dir.display().to_string();
        if !dir.is_empty() && e.message.contains(&dir) {
            e.message = e
                .message
                .replace(&format!("{dir}/"), "")
                .replace(&dir, "the queue directory");
        }
        e
    }
}
