//! Enrollment: one-time invites, and the WebAuthn registration ceremony that turns an invite into
//! a registry record bound to the invited principal.
//!
//! An operator creates an invite (`countersign enroll invite`); only the SHA-256 of its token is
//! stored, so the database alone cannot be used to enroll. The token travels in the URL fragment
//! (`/enroll#TOKEN`), which browsers never send to a server, so it stays out of access logs and
//! `Referer` headers. The ceremony itself is `webauthn-rs`; what it verified is copied into a
//! [`countersign::CredentialRecord`], the published registry format the offline verifier takes.

mod ceremony;
mod invite;

pub use crate::store::Invite;
pub use ceremony::{
    AttestationPolicy, EnrollError, EnrolledSummary, Enroller, EnrollmentConfig, StartedCeremony,
};
pub use invite::{
    CreatedInvite, InviteCreateError, InviteOptions, create_invite, invite_in_data_dir,
    invite_token_hash,
};
