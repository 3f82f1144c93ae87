//! The public queue API over a mapped arena.

#[cfg(feature = "tokio")]
mod asynchronous;
mod dead_letter;
mod framing;
mod handles;
mod inspection;
mod open;
mod queue;
mod receive;
mod send;
mod settings;
mod types;

#[cfg(feature = "tokio")]
pub use asynchronous::{AsyncQueue, MessageStream};
pub use queue::Queue;
pub use types::*;
