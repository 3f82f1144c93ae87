//! `Observer`: a queue seen without joining it (operators' tools: `shmfifo ls`, `stat`,
//! `peek`, `watch`, Prometheus output).
//!
//! An observer opens the queue file read-only, maps it read-only (`PROT_READ`: a store
//! through the mapping would fault, so inspection provably changes nothing) and does not
//! register a participant: a queue at its participant limit can still be inspected, no
//! liveness lock is taken, and nothing an observer does (or dies doing) is left for recovery.
//! Its reads are the same snapshots `Queue::attributes`, `peek` and `inspect` make.

use std::path::Path;

use super::queue::Queue;
use super::types::QueueAttributes;
use super::views::{Counters, Inspection, PeekedMessage};
use crate::error::Result;

/// A read-only, unregistered view of a queue (see [`Queue::observe`]). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Observer {
    q: Queue,
}

impl Queue {
    /// Observes the queue `name` under `/dev/shm` without joining it: read-only, no
    /// participant registered (see [`Observer`]). Works on a queue whose participant slots
    /// are all taken, and with read permission only.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig, SendMessage};
    ///
    /// let name = format!("doc-observe-{}", std::process::id());
    /// let q = Queue::create(&name, &QueueConfig::new().max_participants(1))?;
    /// q.send(&SendMessage::new("g", "m").dedup_id("1"))?;
    /// // The one participant slot is taken: a second open fails, an observer does not.
    /// assert!(Queue::open(&name).is_err());
    /// let o = Queue::observe(&name)?;
    /// assert_eq!(o.attributes().approximate_number_of_messages, 1);
    /// assert_eq!(o.counters().sent, 1);
    /// Queue::unlink(&name)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn observe(name: &str) -> Result<Observer> {
        Self::observe_at(super::queue::shm_path(name)?)
    }

    /// [`Queue::observe`] for a queue at any path.
    ///
    /// # Examples
    ///
    /// ```
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("doc-observe-at-{}", std::process::id()));
    /// let q = Queue::create_at(&path, &QueueConfig::new())?;
    /// let o = Queue::observe_at(&path)?;
    /// assert_eq!(o.path(), Some(path.as_path()));
    /// // Observing registered no participant: only the creator is listed.
    /// assert_eq!(o.inspect(0)?.participants.len(), 1);
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn observe_at(path: impl AsRef<Path>) -> Result<Observer> {
        let path = path.as_ref();
        let file = Self::open_trusted_read_only(path)?;
        Ok(Observer {
            q: Self::attach_observer(file, path.to_owned())?,
        })
    }
}

impl Observer {
    /// [`Queue::prefault`], read-only: maps every page of the queue into this process now.
    pub fn prefault(&self) -> Result<()> {
        self.q.prefault()
    }

    /// [`Queue::attributes`]: settings and message counts (a scan of every slot).
    pub fn attributes(&self) -> QueueAttributes {
        self.q.attributes()
    }

    /// [`Queue::counters`]: lifetime counters over every participant.
    pub fn counters(&self) -> Counters {
        self.q.counters()
    }

    /// [`Queue::peek`]: what a receive could return now, changing nothing.
    pub fn peek(&self, max: usize) -> Result<Vec<PeekedMessage>> {
        self.q.peek(max)
    }

    /// [`Queue::inspect`]: messages by state, groups, participants, slot use, counters. No
    /// participant is `is_self`: an observer is not one.
    pub fn inspect(&self, top: usize) -> Result<Inspection> {
        self.q.inspect(top)
    }

    /// The queue file's path.
    pub fn path(&self) -> Option<&Path> {
        self.q.path()
    }

    /// The metadata of the file as it was opened (`fstat`), whatever its name now names: a
    /// tool that checked a path before observing it compares `(dev, ino)` to know it observes
    /// the file it checked (as [`Queue::file_metadata`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    /// use shmfifo::{Queue, QueueConfig};
    ///
    /// let path = std::env::temp_dir().join(format!("doc-observe-meta-{}", std::process::id()));
    /// let _q = Queue::create_at(&path, &QueueConfig::new())?;
    /// let checked = std::fs::symlink_metadata(&path)?;
    /// let o = Queue::observe_at(&path)?;
    /// let m = o.file_metadata()?;
    /// assert_eq!((m.dev(), m.ino()), (checked.dev(), checked.ino()));
    /// Queue::unlink_at(&path)?;
    /// # Ok::<(), shmfifo::Error>(())
    /// ```
    pub fn file_metadata(&self) -> Result<std::fs::Metadata> {
        self.q.file_metadata()
    }

    /// `Truncated` if the queue's file is now shorter than the mapping, or was found cut under
    /// an earlier look (a long-running observer, such as `shmfifo watch`, checks before each
    /// look).
    pub fn check(&self) -> Result<()> {
        self.q.check_file()
    }
}
