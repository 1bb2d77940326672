//! The core crate's integration tests: one binary, one module per concern.

mod verify;
