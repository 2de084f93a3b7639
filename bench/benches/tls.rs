//! TLS benchmarks (filled in next).

fn main() {}
