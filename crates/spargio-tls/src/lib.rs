//! TLS on spargio (work in progress).
