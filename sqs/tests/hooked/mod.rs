//! A remote queue with a hook ahead of each `SendMessageBatch` (the bridge tests' slow,
//! counting or watching remotes).
#![allow(dead_code)]

use std::time::Duration;

use shmfifo::{BatchEntry, BatchResult, FifoQueue, ReceiveOptions, Received, SendMessage, Sent};

/// What runs ahead of each `SendMessageBatch`, with its entries.
pub type Hook = Box<dyn Fn(&[BatchEntry<'_, SendMessage<'_>>]) + Send + Sync>;

/// What a remote answers a `SendMessageBatch` instead of its inner queue (a proxy's error
/// page, a standard queue's refusal): `None` passes the batch on.
pub type Script = Box<
    dyn Fn(&[BatchEntry<'_, SendMessage<'_>>]) -> Option<shmfifo::Result<Vec<BatchResult<Sent>>>>
        + Send
        + Sync,
>;

/// A remote queue that calls `before` ahead of each `SendMessageBatch`: to look at the local
/// side at that moment, to count, or to be slow; and answers it as `answer` says, where that
/// has an answer.
pub struct Hooked {
    /// The queue every call goes to.
    pub inner: Box<dyn FifoQueue>,
    /// Called ahead of each `SendMessageBatch`.
    pub before: Hook,
    /// The answer to a `SendMessageBatch` instead of the inner queue's, where it has one.
    pub answer: Option<Script>,
}

impl FifoQueue for Hooked {
    fn send(&self, msg: &SendMessage<'_>) -> shmfifo::Result<Sent> {
        self.inner.send(msg)
    }
    fn send_batch(
        &self,
        entries: &[BatchEntry<'_, SendMessage<'_>>],
    ) -> shmfifo::Result<Vec<BatchResult<Sent>>> {
        (self.before)(entries);
        match self.answer.as_ref().and_then(|a| a(entries)) {
            Some(answer) => answer,
            None => self.inner.send_batch(entries),
        }
    }
    fn receive(
        &self,
        opts: &ReceiveOptions,
        attempt_id: Option<&str>,
    ) -> shmfifo::Result<Vec<Received>> {
        self.inner.receive(opts, attempt_id)
    }
    fn delete(&self, receipt_handle: &str) -> shmfifo::Result<()> {
        self.inner.delete(receipt_handle)
    }
    fn delete_batch(
        &self,
        entries: &[BatchEntry<'_, &str>],
    ) -> shmfifo::Result<Vec<BatchResult<()>>> {
        self.inner.delete_batch(entries)
    }
    fn change_visibility(&self, receipt_handle: &str, timeout: Duration) -> shmfifo::Result<()> {
        self.inner.change_visibility(receipt_handle, timeout)
    }
    fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> shmfifo::Result<Vec<BatchResult<()>>> {
        self.inner.change_visibility_batch(entries)
    }
    fn purge(&self) -> shmfifo::Result<()> {
        self.inner.purge()
    }
    fn attributes(&self) -> shmfifo::Result<Vec<(String, String)>> {
        self.inner.attributes()
    }
    fn set_attribute(&self, name: &str, value: &str) -> shmfifo::Result<()> {
        self.inner.set_attribute(name, value)
    }
}

impl Hooked {
    /// `inner` with every `SendMessageBatch` taking `latency` longer (a far remote).
    pub fn delayed(inner: Box<dyn FifoQueue>, latency: Duration) -> Hooked {
        Hooked {
            inner,
            before: Box::new(move |_| std::thread::sleep(latency)),
            answer: None,
        }
    }
}
