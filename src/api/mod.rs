//! The public queue API over a mapped arena.

#[cfg(feature = "tokio")]
mod asynchronous;
mod backend;
pub(crate) mod borrow;
mod copy_out;
mod dead_letter;
mod framing;
mod handles;
mod hashing;
mod id_text;
mod inspection;
mod loan;
mod loan_batch;
mod observe;
mod open;
#[cfg(test)]
mod packs_test;
mod queue;
mod receive;
mod send;
mod settings;
mod sqs_attributes;
mod types;
mod views;

#[cfg(feature = "tokio")]
pub use asynchronous::{AsyncQueue, MessageStream};
pub use backend::{FifoQueue, Received, Sent};
pub use borrow::{BorrowedBatch, BorrowedMessage, BorrowedRef};
pub use dead_letter::DeadLetterCheck;
pub use id_text::{IdText, MessageIdText, ReceiptHandleText};
pub use loan::{Loan, LoanError, LoanOptions};
pub use loan_batch::LoanBatch;
pub use observe::Observer;
pub use queue::Queue;
pub use receive::{Cancel, CANCEL_LOOK};
pub use sqs_attributes::{CREATE_ATTRIBUTES, LOCAL_ARN_PREFIX};
pub use types::*;
pub use views::*;
