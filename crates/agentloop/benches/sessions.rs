//! Session store benchmarks (placeholder while the store is written).
fn main() {}
