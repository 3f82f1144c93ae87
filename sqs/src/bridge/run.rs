//! The run of refusals alike since the remote last acknowledged a message (see
//! [`super::BridgeOptions::max_refused_in_a_row`]).

use std::collections::HashSet;

use shmfifo::{Error, RemoteKind};

/// The refusals since the last acknowledgement: their error code, the distinct messages and
/// the groups refused with it.
#[derive(Default)]
pub(super) struct RefusedRun {
    code: String,
    messages: HashSet<String>,
    groups: HashSet<String>,
}

impl RefusedRun {
    /// Counts a refusal of message `id` of `group` with `err` (a run of another code starts
    /// again); the error to end the bridge with once the run holds `limit` distinct messages.
    /// A limit of 0, and a refusal of a message's content (`InvalidMessageContents`: the
    /// message's own), count nothing.
    pub(super) fn refused(
        &mut self,
        limit: u32,
        group: &str,
        id: &str,
        err: &Error,
    ) -> Option<Error> {
        if limit == 0 || matches!(err, Error::InvalidMessageContents { .. }) {
            return None;
        }
        let code = match err {
            Error::Remote { code, .. } => code.as_str(),
            e => e.sqs_code(),
        };
        if self.code != code {
            *self = RefusedRun {
                code: code.to_owned(),
                ..Default::default()
            };
        }
        self.messages.insert(id.to_owned());
        self.groups.insert(group.to_owned());
        if self.messages.len() < limit as usize {
            return None;
        }
        Some(Error::Remote {
            kind: RemoteKind::Other,
            code: self.code.clone(),
            message: format!(
                "the remote queue refused {} messages of {} groups in a row, all with {}, and \
                 acknowledged none between: a refusal of every message, not of one; the bridge \
                 ends rather than move them to the dead-letter queue (max_refused_in_a_row; the \
                 last: {err})",
                self.messages.len(),
                self.groups.len(),
                self.code
            ),
        })
    }
}
