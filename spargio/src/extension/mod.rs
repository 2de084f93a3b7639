//! Extensions over the native lane.
//!
//! [`UringNativeAny::submit_unsafe`](crate::UringNativeAny::submit_unsafe)
//! submits any SQE built with the [`io_uring`] crate's opcode builders
//! (re-exported here so versions match); [`fs`] holds safe wrappers built
//! on the native lane. `docs/native_extension_cookbook.md` explains how to
//! write such a wrapper.

pub mod fs;

pub use io_uring;
