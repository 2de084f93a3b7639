//! Protocol bridges on spargio (work in progress).
