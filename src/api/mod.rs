//! The public queue API over a mapped arena.

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

pub use queue::Queue;
pub use types::*;
