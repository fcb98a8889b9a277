//! The `whip` binary.
fn main() {}
