//! Extensions over the native lane: safe wrappers built on it.

pub mod fs;
