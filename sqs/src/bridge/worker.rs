//! The bridge's workers: each sends the heads of up to 10 groups to the remote queue as one
//! `SendMessageBatch` and answers with the results in entry order.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use shmfifo::{
    BatchEntry, Error, FifoQueue, Message, MessageAttribute, RemoteKind, Result, SendMessage,
};

/// One message sent to the remote queue, as a worker gets it.
pub(super) struct Entry {
    pub(super) group: String,
    pub(super) id: String,
    pub(super) msg: Arc<Message>,
}

/// A worker's answer: the request's entries and the remote queue's results.
pub(super) struct Reply {
    pub(super) entries: Vec<Entry>,
    pub(super) outcome: Result<Vec<Result<()>>>,
}

/// A worker thread: sends each job (the heads of up to 10 groups) as one request and answers
/// with the results, until the jobs or the replies close.
pub(super) fn work(
    remote: &dyn FifoQueue,
    jobs: &Mutex<mpsc::Receiver<Vec<Entry>>>,
    replies: &mpsc::Sender<Reply>,
) {
    loop {
        let job = jobs.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok(entries) = job else { return };
        let outcome = send(remote, &entries);
        if replies.send(Reply { entries, outcome }).is_err() {
            return;
        }
    }
}

/// The body as it is to be sent: the bytes on a binary queue, else the text.
pub(super) fn body_bytes(m: &Message) -> Option<&[u8]> {
    (!m.body_bytes.is_empty()).then_some(m.body_bytes.as_slice())
}

/// A message's attributes as a send takes them.
pub(super) fn attributes(m: &Message) -> Vec<MessageAttribute<'_>> {
    m.attributes
        .iter()
        .map(|a| MessageAttribute {
            name: &a.name,
            data_type: &a.data_type,
            value: &a.value,
        })
        .collect()
}

/// One `SendMessageBatch` of the entries (one per group); the results in entry order.
fn send(remote: &dyn FifoQueue, entries: &[Entry]) -> Result<Vec<Result<()>>> {
    let attrs: Vec<Vec<MessageAttribute<'_>>> =
        entries.iter().map(|e| attributes(&e.msg)).collect();
    let entry_ids: Vec<String> = (0..entries.len()).map(|i| i.to_string()).collect();
    let batch: Vec<BatchEntry<'_, SendMessage<'_>>> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| BatchEntry {
            id: &entry_ids[i],
            entry: SendMessage {
                group_id: Some(&e.msg.group_id),
                dedup_id: Some(&e.id),
                body: &e.msg.body,
                bytes: body_bytes(&e.msg),
                attributes: &attrs[i],
                delay_seconds: None,
            },
        })
        .collect();
    let mut results = remote.send_batch(&batch)?.into_iter();
    Ok(entry_ids
        .iter()
        .map(|id| match results.next() {
            Some(r) if r.id == *id => r.result.map(|_| ()),
            _ => Err(Error::Remote {
                kind: RemoteKind::Other,
                code: "MissingEntry".into(),
                message: format!("the answer has no result for entry {id} in its place"),
            }),
        })
        .collect())
}
