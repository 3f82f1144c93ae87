//! Operations on receipt handles (delete, change visibility, and their batches), purge and
//! recovery.

use std::time::Duration;

use super::queue::{fault, ms, Queue};
use super::types::*;
use crate::config::MAX_VISIBILITY_TIMEOUT;
use crate::error::{Error, Result};
use crate::protocol::handle::{self, Handle};
use crate::protocol::{recovery, Fault};
use crate::validate;

impl Queue {
    pub(super) fn handle(&self, h: &ReceiptHandle) -> Result<Handle> {
        if h.nonce != self.inner.nonce || h.idx >= self.inner.view.total {
            return Err(Error::ReceiptHandleIsInvalid {
                handle: h.to_string(),
            });
        }
        Ok(Handle {
            idx: h.idx,
            inc: h.inc,
            epoch: h.epoch,
        })
    }

    pub(super) fn handle_fault(&self, f: Fault, h: &ReceiptHandle) -> Error {
        match f {
            Fault::Expired => Error::ReceiptHandleExpired {
                handle: h.to_string(),
            },
            f => fault(f, &self.inner),
        }
    }

    /// Deletes the message received with `handle` (H1–H5).
    pub fn delete(&self, handle: &ReceiptHandle) -> Result<()> {
        let h = self.handle(handle)?;
        let inner = &*self.inner;
        handle::delete(&self.arena(), inner, inner.me, h).map_err(|f| self.handle_fault(f, handle))
    }

    /// Deletes by the text form of a receipt handle.
    pub fn delete_str(&self, handle: &str) -> Result<()> {
        self.delete(&handle.parse()?)
    }

    /// Deletes up to 10 messages by handle text (H8).
    pub fn delete_batch(&self, entries: &[BatchEntry<'_, &str>]) -> Result<Vec<BatchResult<()>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.delete_str(e.entry),
            })
            .collect())
    }

    /// Changes the visibility timeout of the message received with `handle` to `timeout` from
    /// now (H6, V1); zero makes it visible at once.
    pub fn change_visibility(&self, handle: &ReceiptHandle, timeout: Duration) -> Result<()> {
        if timeout > MAX_VISIBILITY_TIMEOUT {
            return Err(Error::invalid(
                "VisibilityTimeout",
                "Must be between 0 and 43200 seconds.",
            ));
        }
        let h = self.handle(handle)?;
        let inner = &*self.inner;
        handle::change_visibility(&self.arena(), inner, inner.me, h, ms(timeout))
            .map_err(|f| self.handle_fault(f, handle))
    }

    /// Changes visibility by the text form of a receipt handle.
    pub fn change_visibility_str(&self, handle: &str, timeout: Duration) -> Result<()> {
        self.change_visibility(&handle.parse()?, timeout)
    }

    /// Changes the visibility of up to 10 messages (H8).
    pub fn change_visibility_batch(
        &self,
        entries: &[BatchEntry<'_, (&str, Duration)>],
    ) -> Result<Vec<BatchResult<()>>> {
        validate::batch_ids(entries.iter().map(|e| e.id))?;
        Ok(entries
            .iter()
            .map(|e| BatchResult {
                id: e.id.to_owned(),
                result: self.change_visibility_str(e.entry.0, e.entry.1),
            })
            .collect())
    }

    /// Deletes every message, visible or in flight (P1). Returns how many.
    pub fn purge(&self) -> Result<u64> {
        let inner = &*self.inner;
        handle::purge(&self.arena(), inner, inner.me).map_err(|f| fault(f, inner))
    }

    /// Repairs what dead participants left behind (also done on open, and by idle receivers).
    pub fn recover(&self) -> Result<recovery::Recovered> {
        let inner = &*self.inner;
        recovery::recover(&self.arena(), inner, inner.me).map_err(|f| fault(f, inner))
    }
}
