//! The interposer against the real approval service (in process, 127.0.0.1:0), a scripted MCP
//! server and a scripted client over in-memory pipes; the approver signs with a software key.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a panic is a failed test (clippy.toml covers #[test] fns, not helpers)"
)]

mod approvers;
mod edge;
mod http;
mod mrtr;
mod stdio;
mod support;
mod tasks;
mod tasks_ext;
