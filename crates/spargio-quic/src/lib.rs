//! QUIC for spargio (skeleton; being built).
