//! How a bridge runs ([`BridgeOptions`]) and what it did ([`BridgeReport`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The longest local visibility timeout a bridge uses: a killed bridge's messages are sent
/// again after it, and the remote drops the resend as a duplicate only within SQS's 5-minute
/// deduplication interval, so it stays a minute inside it.
pub const MAX_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(240);

/// How a bridge runs.
#[derive(Debug, Clone)]
pub struct BridgeOptions {
    /// Visibility timeout of the local receives (default 30 s, from 1 s to
    /// [`MAX_VISIBILITY_TIMEOUT`]), renewed while a message is held: how long a killed bridge's
    /// messages stay hidden before a restarted one sends them again.
    pub visibility_timeout: Duration,
    /// Long poll of each local receive while nothing is in flight to the remote (default 1 s).
    pub wait: Duration,
    /// Most messages sent per second (`None`: as fast as the remote answers).
    pub max_per_second: Option<u32>,
    /// Return once the local queue has no visible and no in-flight message apart from those of
    /// the groups the bridge stopped (listed in [`BridgeReport::stopped`]); default: run until
    /// cancelled.
    pub until_empty: bool,
    /// Set (from any thread) to stop once the requests in flight are answered.
    pub cancel: Option<Arc<AtomicBool>>,
    /// Where to keep the bridge's counters, cumulative across restarts (see
    /// [`status_path`](super::status_path); `None`: nowhere). `shmfifo stat` and `shmfifo metrics` show them.
    pub status_file: Option<std::path::PathBuf>,
    /// The remote queue's name or URL, recorded in the status file.
    pub remote_name: String,
    /// Requests in flight to the remote queue at once, each carrying the heads of up to 10
    /// groups (default 4, at least 1).
    pub concurrency: usize,
    /// Refusals of one message before it moves to the local dead-letter queue, or, without
    /// one, before its group is reported stopped (default 5, at least 1). Also the answers
    /// without an SQS error code, status 4xx, to one message sent alone before its group is
    /// reported stopped (never dead-lettered: see the module doc, "Remote failures").
    pub max_tries: u32,
    /// The wait after a message's first refusal (default 1 s); it doubles with each refusal,
    /// up to `max_backoff`, and each wait is drawn between half and all of it (jitter).
    pub backoff: Duration,
    /// The longest wait after a refusal (default 60 s): a stopped group is tried this often.
    pub max_backoff: Duration,
    /// Distinct messages refused in a row with one error code, with nothing acknowledged in
    /// between, that end the bridge (default 10; 0: never): a remote that refuses every
    /// message alike, for a reason the bridge does not know as fatal (a new error code, a
    /// policy that denies every send), would otherwise see each group's head refused
    /// `max_tries` times and moved to the local dead-letter queue, and the next, until the
    /// whole queue had moved there. The bridge ends with the last refusal's code and leaves
    /// the messages it has not moved in the local queue: at most `max_refused_in_a_row - 1`
    /// are moved before it ends (each after its `max_tries` refusals; with many groups, whose
    /// heads are refused together, fewer or none). Refusals of a message's content
    /// (`InvalidMessageContents`: a binary body SQS cannot carry, refused locally) are the
    /// message's own and do not count.
    pub max_refused_in_a_row: u32,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            visibility_timeout: Duration::from_secs(30),
            wait: Duration::from_secs(1),
            max_per_second: None,
            until_empty: false,
            cancel: None,
            status_file: None,
            remote_name: String::new(),
            concurrency: 4,
            max_tries: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            max_refused_in_a_row: 10,
        }
    }
}

/// What a bridge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BridgeReport {
    /// Messages acknowledged by the remote queue and deleted locally.
    pub forwarded: u64,
    /// Messages sent again after a transport failure, throttling or a 5xx answer.
    pub retried: u64,
    /// Refusals by the remote queue of a message for itself (one message refused three times
    /// counts three).
    pub failed: u64,
    /// Messages moved to the local dead-letter queue after `max_tries` refusals.
    pub dead_lettered: u64,
    /// The groups stopped at a message the remote queue refuses (no local dead-letter queue),
    /// or answers with a 4xx page whenever it goes alone, sorted: their messages stay in the
    /// local queue.
    pub stopped: Vec<String>,
}
