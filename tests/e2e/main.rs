//! End-to-end tests of the built `tdd` binary.
