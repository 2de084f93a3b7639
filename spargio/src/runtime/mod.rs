//! Building, entering and stopping a runtime.
//!
//! [`RuntimeBuilder`] validates its knobs into a `Config`; `start` creates
//! the shared state, spawns one thread per shard, creates each ring on its
//! own thread (`SINGLE_ISSUER`), and releases the shards only once every
//! ring fd is published. [`Runtime`] owns the threads; [`RuntimeHandle`] is
//! the cloneable front door; `context` tracks which shard a thread runs;
//! [`block_on`] drives a future from a plain thread.

mod block_on;
mod builder;
pub(crate) mod context;
mod handle;
#[allow(clippy::module_inception)]
mod runtime;

pub use block_on::block_on;
pub(crate) use builder::Config;
pub use builder::{BackendKind, RuntimeBuilder};
pub use handle::RuntimeHandle;
pub use runtime::Runtime;
