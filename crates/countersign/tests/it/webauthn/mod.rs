//! WebAuthn assertion verification: end-to-end checks, backend agreement, external vectors,
//! encoding policies and parser robustness.

mod cose;
mod der;
mod external;
mod props;
mod support;
mod verify;
