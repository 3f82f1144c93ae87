//! `shmfifo._shmfifo`: the native module under the `shmfifo` Python package.
//!
//! A thin layer over `shmfifo::Queue` that speaks plain Python values (str, bytes, int, tuples,
//! dicts); the package's pure-Python modules build the boto3-shaped client and the Pythonic
//! `Queue` on it. A call made to wait (a receive with a wait time, a redrive, and create and
//! open) releases the GIL while it runs. The others hold it: they take microseconds, except
//! a send that meets its dedup id still being sent by another process, which waits up to a
//! second for it, and a call that waits for a stopped process holding what it needs (up to
//! about a second, then a retryable error). Times cross this boundary in milliseconds.

use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use shmfifo::{
    BatchEntry, Deduplication, Message, MessageAttribute, PeekedMessage, Queue, QueueConfig,
    ReceiveBuffer, ReceiveOptions, ReceivedAttribute, RedriveOptions, SendMessage,
};

// The package's exception class, defined in Python (`shmfifo/_errors.py`) so that it carries
// `code`, `message` and `kind` properties and pickles like any Python exception.
pyo3::import_exception!(shmfifo._errors, Error);

/// The Python exception for a library error.
fn err(e: shmfifo::Error) -> PyErr {
    // SQS's words where they are recorded, as serve answers them (S1, S12, H2, H4).
    Error::new_err((e.sqs_code(), e.sqs_message(), format!("{:?}", e.code())))
}

/// Whether SQS would blame the request (a batch entry's `SenderFault`): every SQS error code
/// is the sender's; shmfifo's own (a full arena, a busy participant) are not.
fn sender_fault(e: &shmfifo::Error) -> bool {
    let c = e.sqs_code();
    !(c.starts_with("shmfifo.") || c == "ServiceUnavailable")
}

/// An attribute to send: `(name, data_type, value)`, the value `str` or `bytes`.
type AttrIn = (String, String, Vec<u8>);

/// A batch entry's failure: `(code, message, sender_fault, kind)`.
type Failure = (String, String, bool, String);

/// One entry of `send_batch`: `(id, group_id, body, dedup_id, attributes, delay_seconds)`.
type SendEntry = (
    String,
    Option<String>,
    BodyIn,
    Option<String>,
    Option<Vec<AttrIn>>,
    Option<u32>,
);

/// A shmfifo queue handle (one participant of the queue while it is open).
#[pyclass(module = "shmfifo._shmfifo", frozen)]
struct RawQueue {
    q: Mutex<Option<Queue>>,
    /// The process that opened it: a handle is one process's participant.
    pid: u32,
}

impl RawQueue {
    fn wrap(q: Queue) -> Self {
        RawQueue {
            q: Mutex::new(Some(q)),
            pid: std::process::id(),
        }
    }

    /// The handle (an `Arc` clone); `ValueError` once closed, or in a child forked after it
    /// was opened (multiprocessing's `fork` start method), which must open the
    /// queue again: the parent's participant is not the child's to act as.
    fn get(&self) -> PyResult<Queue> {
        if std::process::id() != self.pid {
            return Err(PyValueError::new_err(format!(
                "this queue handle was opened by process {} before a fork: open the queue again in this process (Queue.open, or a new client)",
                self.pid
            )));
        }
        self.q
            .lock()
            .map_err(|_| PyValueError::new_err("queue handle poisoned"))?
            .clone()
            .ok_or_else(|| PyValueError::new_err("the queue handle is closed"))
    }
}

fn attributes_in(attrs: &[AttrIn]) -> Vec<MessageAttribute<'_>> {
    attrs
        .iter()
        .map(|(n, t, v)| MessageAttribute {
            name: n,
            data_type: t,
            value: v,
        })
        .collect()
}

fn attributes_out<'py>(py: Python<'py>, attrs: &[ReceivedAttribute]) -> Bound<'py, PyList> {
    let items: Vec<(String, String, Py<PyAny>)> = attrs
        .iter()
        .map(|a| {
            // String and Number values are text; Binary (and custom binary types) bytes.
            let value: Py<PyAny> = if a.data_type.starts_with("Binary") {
                PyBytes::new(py, &a.value).into_any().unbind()
            } else {
                String::from_utf8_lossy(&a.value)
                    .into_pyobject(py)
                    .map(|s| s.into_any().unbind())
                    .expect("a str")
            };
            (a.name.clone(), a.data_type.clone(), value)
        })
        .collect();
    PyList::new(py, items).expect("a list")
}

/// A body from Python: `str` (text), or `bytes` (any bytes on a binary queue; text on a
/// text queue).
#[derive(FromPyObject)]
enum BodyIn {
    Text(String),
    Bytes(Vec<u8>),
}

impl BodyIn {
    /// As `SendMessage` takes it: `(body, bytes)`.
    fn views(&self) -> (&str, Option<&[u8]>) {
        match self {
            BodyIn::Text(s) => (s, None),
            BodyIn::Bytes(b) => ("", Some(b)),
        }
    }
}

/// The fields a received and a peeked message share (the same names on both types).
macro_rules! message_dict {
    ($py:expr, $m:expr) => {{
        let (py, m) = ($py, $m);
        let d = PyDict::new(py);
        d.set_item("message_id", m.message_id.to_string())?;
        if m.body_bytes.is_empty() {
            d.set_item("body", &m.body)?;
        } else {
            // A binary queue's body: `bytes`.
            d.set_item("body", PyBytes::new(py, &m.body_bytes))?;
        }
        d.set_item("group_id", &m.group_id)?;
        d.set_item("dedup_id", m.dedup_id.as_deref())?;
        d.set_item("sequence_number", m.sequence_number.to_string())?;
        d.set_item("sent_timestamp", m.sent_timestamp)?;
        d.set_item("first_receive_timestamp", m.first_receive_timestamp)?;
        d.set_item("receive_count", m.receive_count)?;
        d.set_item("attributes", attributes_out(py, &m.attributes))?;
        d.set_item("dead_letter_source", m.dead_letter_source.as_deref())?;
        d
    }};
}

fn message_out<'py>(py: Python<'py>, m: &Message) -> PyResult<Bound<'py, PyDict>> {
    let d = message_dict!(py, m);
    d.set_item("receipt_handle", m.receipt_handle.text().as_str())?;
    Ok(d)
}

fn peeked_out<'py>(py: Python<'py>, m: &PeekedMessage) -> PyResult<Bound<'py, PyDict>> {
    Ok(message_dict!(py, m))
}

/// A batch entry's [`Failure`], its `kind` the Rust library's `ErrorCode` name as a raised
/// error's (`err`).
fn failure(e: &shmfifo::Error) -> Failure {
    (
        e.sqs_code().to_owned(),
        e.sqs_message(),
        sender_fault(e),
        format!("{:?}", e.code()),
    )
}

#[pymethods]
impl RawQueue {
    /// Creates a queue file at `path` (a name under /dev/shm if it has no `/`) from SQS
    /// `CreateQueue` attributes (names and string values) and shmfifo's sizes.
    #[staticmethod]
    // The keyword arguments Python sees: each an optional size.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (path, attributes=Vec::new(), max_messages=None, max_groups=None,
                        max_participants=None, deduplication=None, dedup_entries=None,
                        test_clock=false, body_mode=None, size_limit=None))]
    fn create(
        py: Python<'_>,
        path: &str,
        attributes: Vec<(String, String)>,
        max_messages: Option<u32>,
        max_groups: Option<u32>,
        max_participants: Option<u32>,
        deduplication: Option<&str>,
        dedup_entries: Option<u32>,
        test_clock: bool,
        body_mode: Option<&str>,
        size_limit: Option<u64>,
    ) -> PyResult<RawQueue> {
        let mut cfg = QueueConfig::new().test_clock(test_clock);
        if let Some(n) = size_limit {
            cfg = cfg.size_limit(n);
        }
        match body_mode {
            None | Some("text") => {}
            Some("binary") => cfg = cfg.body_mode(shmfifo::BodyMode::Binary),
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "body_mode: \"text\" or \"binary\", not {other:?}"
                )))
            }
        }
        if let Some(n) = max_messages {
            cfg = cfg.max_messages(n);
        }
        if let Some(n) = max_groups {
            cfg = cfg.max_groups(n);
        }
        if let Some(n) = max_participants {
            cfg = cfg.max_participants(n);
        }
        if let Some(n) = dedup_entries {
            cfg = cfg.dedup_entries(n);
        }
        match deduplication {
            None => {}
            Some("off") => cfg = cfg.deduplication(Deduplication::Off),
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                "deduplication: only \"off\" (or DeduplicationScope in attributes), not {other:?}"
            )))
            }
        }
        let cfg = cfg
            .from_sqs_attributes(attributes.iter().map(|(n, v)| (n.as_str(), v.as_str())))
            .map_err(err)?;
        let path = path.to_owned();
        py.detach(move || {
            if path.contains('/') {
                Queue::create_at(&path, &cfg)
            } else {
                Queue::create(&path, &cfg)
            }
        })
        .map(RawQueue::wrap)
        .map_err(err)
    }

    /// Opens the queue at `path` (a name under /dev/shm if it has no `/`).
    #[staticmethod]
    fn open(py: Python<'_>, path: &str) -> PyResult<RawQueue> {
        let path = path.to_owned();
        py.detach(move || {
            if path.contains('/') {
                Queue::open_at(&path)
            } else {
                Queue::open(&path)
            }
        })
        .map(RawQueue::wrap)
        .map_err(err)
    }

    /// Removes the queue file at `path` (processes that have it open keep using it).
    #[staticmethod]
    fn unlink(path: &str) -> PyResult<()> {
        if path.contains('/') {
            Queue::unlink_at(path)
        } else {
            Queue::unlink(path)
        }
        .map_err(err)
    }

    /// Releases this handle's participant (later calls raise `ValueError`).
    fn close(&self) -> PyResult<()> {
        let q = self
            .q
            .lock()
            .map_err(|_| PyValueError::new_err("queue handle poisoned"))?
            .take();
        drop(q);
        Ok(())
    }

    /// Whether the handle is closed (by `close`, in any thread).
    fn is_closed(&self) -> bool {
        self.q.lock().map_or(true, |g| g.is_none())
    }

    /// The queue file's path (`None` for an anonymous queue).
    fn path(&self) -> PyResult<Option<String>> {
        Ok(self.get()?.path().map(|p| p.display().to_string()))
    }

    /// `(st_dev, st_ino)` of the file this handle has open, whatever its path names now: a
    /// holder of a path compares it with `os.stat(path)` to know the queue there is this one.
    fn file_id(&self) -> PyResult<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = self.get()?.file_metadata().map_err(err)?;
        Ok((m.dev(), m.ino()))
    }

    /// What the queue's bodies are: `"text"` (SQS's) or `"binary"` (any bytes).
    fn body_mode(&self) -> PyResult<&'static str> {
        Ok(match self.get()?.body_mode() {
            shmfifo::BodyMode::Text => "text",
            shmfifo::BodyMode::Binary => "binary",
        })
    }

    /// Sends one message: `(message_id, sequence_number, duplicate)`.
    #[pyo3(signature = (group_id, body, dedup_id=None, attributes=None, delay_seconds=None))]
    fn send(
        &self,
        group_id: Option<&str>,
        body: BodyIn,
        dedup_id: Option<&str>,
        attributes: Option<Vec<AttrIn>>,
        delay_seconds: Option<u32>,
    ) -> PyResult<(String, String, bool)> {
        let q = self.get()?;
        let attrs = attributes.unwrap_or_default();
        let a = attributes_in(&attrs);
        let (body, bytes) = body.views();
        let msg = SendMessage {
            group_id,
            dedup_id,
            body,
            bytes,
            attributes: &a,
            delay_seconds,
        };
        let r = q.send(&msg).map_err(err)?;
        Ok((
            r.message_id.to_string(),
            r.sequence_number.to_string(),
            r.duplicate,
        ))
    }

    /// Sends a batch: per entry `(id, True, (message_id, sequence_number, duplicate))` or
    /// `(id, False, (code, message, sender_fault, kind))`; a request-level error raises.
    fn send_batch(&self, entries: Vec<SendEntry>) -> PyResult<Vec<(String, bool, Py<PyAny>)>> {
        let q = self.get()?;
        let attrs: Vec<Vec<MessageAttribute<'_>>> = entries
            .iter()
            .map(|e| attributes_in(e.4.as_deref().unwrap_or(&[])))
            .collect();
        let batch: Vec<BatchEntry<'_, SendMessage<'_>>> = entries
            .iter()
            .zip(&attrs)
            .map(|(e, a)| BatchEntry {
                id: &e.0,
                entry: SendMessage {
                    group_id: e.1.as_deref(),
                    dedup_id: e.3.as_deref(),
                    body: e.2.views().0,
                    bytes: e.2.views().1,
                    attributes: a,
                    delay_seconds: e.5,
                },
            })
            .collect();
        let results = q.send_batch(&batch).map_err(err)?;
        Python::attach(|py| {
            results
                .into_iter()
                .map(|r| {
                    Ok(match r.result {
                        Ok(s) => (
                            r.id,
                            true,
                            (
                                s.message_id.to_string(),
                                s.sequence_number.to_string(),
                                s.duplicate,
                            )
                                .into_pyobject(py)?
                                .into_any()
                                .unbind(),
                        ),
                        Err(e) => (
                            r.id,
                            false,
                            failure(&e).into_pyobject(py)?.into_any().unbind(),
                        ),
                    })
                })
                .collect()
        })
    }

    /// Receives up to `max` messages, waiting up to `wait_ms` (the queue's default if
    /// `None`) with the GIL released; each a dict.
    #[pyo3(signature = (max=1, visibility_timeout_ms=None, wait_ms=None, attempt_id=None))]
    fn receive<'py>(
        &self,
        py: Python<'py>,
        max: u32,
        visibility_timeout_ms: Option<u64>,
        wait_ms: Option<u64>,
        attempt_id: Option<String>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let q = self.get()?;
        let mut opts = ReceiveOptions::max(max);
        if let Some(v) = visibility_timeout_ms {
            opts = opts.visibility_timeout(Duration::from_millis(v));
        }
        if let Some(w) = wait_ms {
            opts = opts.wait(Duration::from_millis(w));
        }
        // One long poll (counted once in NumberOfEmptyReceives, as SQS counts it) that runs
        // Python's signal handlers at each of its looks (every 100 ms, `shmfifo::CANCEL_LOOK`),
        // in this thread, with the GIL taken back for the look: one wait of 20 s ignored Ctrl-C
        // to its end (and a message that came meanwhile was received, then lost to the
        // KeyboardInterrupt until its visibility timeout). A handler's exception ends the wait
        // with nothing taken and is raised here. A handle closed by another thread ends it too.
        let raised: Mutex<Option<PyErr>> = Mutex::new(None);
        let mut buf = ReceiveBuffer::new();
        let look = || {
            Python::attach(|py| match py.check_signals() {
                Ok(()) => false,
                Err(e) => {
                    if let Ok(mut r) = raised.lock() {
                        *r = Some(e);
                    }
                    true
                }
            }) || self.is_closed()
        };
        let n = py
            .detach(|| q.receive_cancellable_into(&opts, attempt_id.as_deref(), &look, &mut buf))
            .map_err(err)?;
        // A look that raised ended the wait before anything was taken (the library looks only
        // when a try took nothing, and returns at once): n is 0 then.
        if let Some(e) = raised.lock().ok().and_then(|mut r| r.take()) {
            if n == 0 {
                return Err(e);
            }
        }
        buf.messages().iter().map(|m| message_out(py, m)).collect()
    }

    /// Deletes a received message by its receipt handle.
    fn delete(&self, receipt_handle: &str) -> PyResult<()> {
        self.get()?.delete_str(receipt_handle).map_err(err)
    }

    /// Deletes a batch: per entry `(id, None)` or `(id, (code, message, sender_fault, kind))`.
    #[allow(clippy::type_complexity)]
    fn delete_batch(
        &self,
        entries: Vec<(String, String)>,
    ) -> PyResult<Vec<(String, Option<Failure>)>> {
        let q = self.get()?;
        let batch: Vec<BatchEntry<'_, &str>> = entries
            .iter()
            .map(|(id, h)| BatchEntry {
                id,
                entry: h.as_str(),
            })
            .collect();
        Ok(q.delete_batch(&batch)
            .map_err(err)?
            .into_iter()
            .map(|r| (r.id, r.result.err().map(|e| failure(&e))))
            .collect())
    }

    /// Changes a received message's visibility timeout.
    fn change_visibility(&self, receipt_handle: &str, timeout_ms: u64) -> PyResult<()> {
        self.get()?
            .change_visibility_str(receipt_handle, Duration::from_millis(timeout_ms))
            .map_err(err)
    }

    /// Changes visibility in a batch: entries `(id, receipt_handle, timeout_ms)`; per entry
    /// `(id, None)` or `(id, (code, message, sender_fault, kind))`.
    #[allow(clippy::type_complexity)]
    fn change_visibility_batch(
        &self,
        entries: Vec<(String, String, u64)>,
    ) -> PyResult<Vec<(String, Option<Failure>)>> {
        let q = self.get()?;
        let batch: Vec<BatchEntry<'_, (&str, Duration)>> = entries
            .iter()
            .map(|(id, h, t)| BatchEntry {
                id,
                entry: (h.as_str(), Duration::from_millis(*t)),
            })
            .collect();
        Ok(q.change_visibility_batch(&batch)
            .map_err(err)?
            .into_iter()
            .map(|r| (r.id, r.result.err().map(|e| failure(&e))))
            .collect())
    }

    /// Moves a test clock forward by `ms` (a queue created with `test_clock=True`).
    fn advance_clock(&self, ms: u64) -> PyResult<()> {
        self.get()?
            .advance_clock(Duration::from_millis(ms))
            .map_err(|e| {
                // In Python's words: the library's text names its Rust setting.
                let text = e.to_string().replace(
                    "QueueConfig::test_clock(true)",
                    "test_clock=True (Queue.create)",
                );
                Error::new_err((e.sqs_code(), text, format!("{:?}", e.code())))
            })
    }

    /// Removes every message (dedup ids too); returns how many.
    fn purge(&self) -> PyResult<u64> {
        self.get()?.purge().map_err(err)
    }

    /// `GetQueueAttributes` names and string values (SQS's formats).
    fn attributes(&self) -> PyResult<Vec<(&'static str, String)>> {
        let q = self.get()?;
        let a = q.attributes().sqs_attributes();
        // A file cut (by anyone who may write it): its figures read as zeros, not the queue's.
        q.check_file().map_err(err)?;
        Ok(a)
    }

    /// Sets one attribute by its SQS name, live for every process.
    fn set_attribute(&self, name: &str, value: &str) -> PyResult<()> {
        self.get()?.set_attribute(name, value).map_err(err)
    }

    /// Sets several attributes by their SQS names at once: all are checked before any
    /// applies (one bad name or value changes nothing), as SQS's SetQueueAttributes.
    fn set_attributes(&self, attributes: Vec<(String, String)>) -> PyResult<()> {
        self.get()?
            .set_attributes_by_name(attributes.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(err)
    }

    /// The lifetime counters, by name.
    fn counters(&self) -> PyResult<Vec<(&'static str, u64)>> {
        let q = self.get()?;
        let c: Vec<_> = q
            .counters()
            .named()
            .iter()
            .map(|(n, v, _)| (*n, *v))
            .collect();
        // As in `attributes`.
        q.check_file().map_err(err)?;
        Ok(c)
    }

    /// What a receive would return now, changing nothing; each a dict (no receipt handle).
    fn peek<'py>(&self, py: Python<'py>, max: usize) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let got = self.get()?.peek(max).map_err(err)?;
        got.iter().map(|m| peeked_out(py, m)).collect()
    }

    /// Moves this dead-letter queue's messages back to their sources (or `destination`);
    /// returns `(moved, skipped, cancelled)`. Releases the GIL while it runs.
    #[pyo3(signature = (destination=None, max_per_second=None, limit=None))]
    fn redrive(
        &self,
        py: Python<'_>,
        destination: Option<String>,
        max_per_second: Option<u32>,
        limit: Option<u64>,
    ) -> PyResult<(u64, u64, bool)> {
        let q = self.get()?;
        let opts = RedriveOptions {
            destination,
            max_per_second,
            limit,
            cancel: None,
            sources: None,
            progress: None,
        };
        let r = py.detach(move || q.redrive(&opts)).map_err(err)?;
        Ok((r.moved, r.skipped, r.cancelled))
    }
}

/// The native module.
#[pymodule]
fn _shmfifo(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RawQueue>()?;
    m.add("LOCAL_ARN_PREFIX", shmfifo::LOCAL_ARN_PREFIX)?;
    Ok(())
}
