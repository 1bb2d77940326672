//! The reference `approval_callback` service.
//!
//! A gateway creates a request (`POST /v1/approvals`) and gets PENDING at once; an approver
//! authenticates with a WebAuthn credential, fetches a challenge `nonce || op_hash(decision)` and
//! submits the assertion; the service runs the core verifier on it before accepting it, and the
//! first accepted verdict wins atomically. The gateway follows the redrive URL, verifies the
//! evidence itself, and collects a single-use grant bound to the exact call. Every step is
//! recorded in a hash-chained, signed audit log. See docs/spec/service.md.

pub mod address;
pub mod audit;
pub mod auditors;
pub mod clock;
pub mod config;
pub mod demo;
pub mod enroll;
mod error;
pub mod files;
pub mod gateways;
pub mod hints;
mod http;
mod notify;
pub mod preauth;
mod random;
mod serve;
mod service;
pub mod store;
pub mod witness;

pub use clock::{Clock, DatabaseTime, ManualClock, SteadyClock, SystemClock};
pub use config::{Config, ConfigError};
pub use error::{ApiError, ErrorCode, NotNfc};
pub use http::{Display, Mark, Row, Segment, TILES_PREFIX, build_router, review_display};
pub use notify::{Notice, Notification, Step, time_left};
pub use serve::{ServeOptions, open_state, serve, serve_http, shutdown_signal};
pub use service::{
    AUDIT_PAGE_DEFAULT, AUDIT_PAGE_MAX, AppState, AssertionBody, ConsistencyProof, CreateRequest,
    DEFAULT_PROFILE, DecisionChallenge, EnrollFinish, EnrollOptions, EnrollStart, ExtendRequest,
    Extended, GrantReceipt, GrantRequest, Inbox, InboxItem, InclusionProof, LineReader,
    LoginChallenge, LoginResponse, MAX_AGENT_TOOL_BYTES, ReviewView, StandingProposal,
    StandingView, StateParts, TLOG_PROOF_REACH, WaiterStats,
};
