//! Building, entering and stopping a runtime.
//!
//! [`RuntimeBuilder`] validates its knobs into a `Config`; `start` creates
//! the shared state and every ring (disabled, on the building thread, so
//! setup errors surface from `build`), then spawns one thread per shard.
//! Each shard enables its own ring, which makes it the ring's single
//! issuer; `build` returns once every shard has reported its ring enabled
//! (so a refused ring is an error from `build`). [`Runtime`] owns the
//! threads; [`RuntimeHandle`] is the cloneable front door (which shard a
//! thread runs is `scheduler::context`'s business); [`block_on`] drives a
//! future from a plain thread; [`run`], [`run_with`]
//! and [`run_local_on`] wrap build, run and shutdown in one future.

mod backend;
mod block_on;
mod builder;
mod entry;
mod handle;
pub(crate) mod macro_output;
#[allow(clippy::module_inception)]
mod runtime;

pub use backend::{probe_io_uring, BackendKind, IoUringRefusal};
pub use block_on::block_on;
pub use builder::RuntimeBuilder;
pub(crate) use builder::{available_cpus, Config};
pub use entry::{run, run_local_on, run_with};
pub use handle::RuntimeHandle;
pub use runtime::Runtime;
