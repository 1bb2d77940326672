//! Integration tests of the approval service (one binary: compile time matters).
#![allow(unreachable_pub)]

mod admission;
mod auditproof;
mod client;
mod enroll;
mod gateways;
mod hardening;
mod http_errors;
mod lifecycle;
mod merkle;
mod preauth;
mod readiness;
mod revoke;
mod standing;
mod support;
mod web;
mod webhook;
