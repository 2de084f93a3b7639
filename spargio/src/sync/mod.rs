//! Structured cancellation: [`CancellationToken`] and [`TaskGroup`].
//!
//! A token is a tree node: cancelling it marks it and its descendants and
//! wakes their waiters (each waiter is a slab slot freed when its wait ends
//! or is dropped). A task group races each of its tasks against the group
//! token, so cancellation drops a task's future at its next await point;
//! a drop guard inside each task records how it ended, which is how
//! [`TaskGroup::wait`] accounts for every task.

mod cancel;
mod task_group;

pub use cancel::{CancellationToken, Cancelled};
pub use task_group::{GroupReport, TaskGroup, TaskGroupJoinHandle};
