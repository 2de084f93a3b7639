//! WebSocket on spargio (work in progress).
