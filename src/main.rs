//! The `tdd` command-line tool.

fn main() {}
