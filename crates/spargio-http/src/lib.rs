//! HTTP for spargio (work in progress).
