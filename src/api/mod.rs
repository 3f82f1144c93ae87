//! The public queue API over a mapped arena.

mod queue;
mod types;

pub use queue::Queue;
pub use types::*;
