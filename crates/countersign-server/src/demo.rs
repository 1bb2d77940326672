//! The demo software key of `countersign demo`, and why every other service refuses it.
//!
//! `countersign demo` lets someone without a security key watch a held call be approved: a
//! software authenticator whose private key sits in a file of the demo's data directory signs
//! the approval. Such a key proves nothing about who approved, so it must never approve anything
//! outside the demo. It is marked twice, and either mark is enough for the service to know it:
//!
//! - its AAGUID is [`DEMO_AAGUID`] (the authenticator model), recorded at enrollment;
//! - its principal is [`DEMO_PRINCIPAL`], which is also what every verdict names as the approver
//!   (`approvers[].principal`), so no one reading a verdict can take it for a person's key.
//!
//! A service accepts a credential so marked only when its configuration says
//! [`Config::danger_accept_demo_key`](crate::Config::danger_accept_demo_key), which no
//! configuration file can set: only the `demo` command sets it, in code. Every other service
//! refuses the key at each door an approver uses: enrollment (`enroll_finish`), login, a session
//! opened earlier (a demo data directory later served by `countersign serve`), and the decision.
//!
//! Those refusals say why. Beneath them, a service that is not the demo's treats the demo key as
//! revoked in the registry it verifies with ([`as_trusted`]; the store keeps the record as
//! enrolled), so no path that checks evidence against that registry (a standing grant's use,
//! any added later) can accept the demo key's signature either.
//!
//! What this does not do: stop a *different* software authenticator. Anyone can build one that
//! claims another AAGUID; the registry then records it with attestation `none`, and its evidence
//! is rated by what it proves (docs/THREAT-MODEL.md). The marks keep the labelled demo key, whose
//! private key is a readable file, out of real use.
//!
//! The demo key signs with user presence only (UP, not UV): no user was verified, so the
//! verdict's `identity_assurance` is AAL1, derived from the signed flags like any other.

use crate::error::ApiError;
use countersign::{Aaguid, CredentialRecord};

/// The AAGUID the demo software key reports: the ASCII bytes `cs-demo-softkey!`.
pub const DEMO_AAGUID: Aaguid = Aaguid(*b"cs-demo-softkey!");

/// The principal the demo software key is enrolled as: what every verdict and the registry show.
pub const DEMO_PRINCIPAL: &str = "demo software key (not a hardware authenticator)";

/// Whether `record` is the demo software key (either mark).
pub fn is_demo_credential(record: &CredentialRecord) -> bool {
    record.aaguid == Some(DEMO_AAGUID) || record.principal == DEMO_PRINCIPAL
}

/// Refuse `record` if it is the demo key and this service is not the demo's.
pub(crate) fn refuse_outside_demo(
    config: &crate::Config,
    record: &CredentialRecord,
) -> Result<(), ApiError> {
    if is_demo_credential(record) && !config.danger_accept_demo_key {
        return Err(ApiError::unauthorized(
            "this is the demo software key of `countersign demo`: only the demo's own service \
             accepts it",
        ));
    }
    Ok(())
}

/// The enrolled records as this service trusts them: outside the demo, the demo key is revoked.
pub(crate) fn as_trusted(
    config: &crate::Config,
    mut records: Vec<CredentialRecord>,
) -> Vec<CredentialRecord> {
    if !config.danger_accept_demo_key {
        for record in records.iter_mut().filter(|r| is_demo_credential(r)) {
            record.revoked = true;
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(principal: &str, aaguid: Option<Aaguid>) -> CredentialRecord {
        CredentialRecord {
            credential_id: vec![1; 16],
            principal: principal.to_owned(),
            public_key: vec![],
            aaguid,
            backup_eligible: None,
            attestation: None,
            sign_count: 0,
            revoked: false,
        }
    }

    #[test]
    fn either_mark_makes_the_demo_key_and_only_the_demo_service_accepts_it() {
        let mut config = crate::Config::default();
        let by_aaguid = record("alice", Some(DEMO_AAGUID));
        let by_name = record(DEMO_PRINCIPAL, None);
        let ordinary = record(
            "alice",
            Aaguid::parse("00000000-0000-0000-0000-000000000001"),
        );
        assert!(is_demo_credential(&by_aaguid) && is_demo_credential(&by_name));
        assert!(!is_demo_credential(&ordinary));
        for demo in [&by_aaguid, &by_name] {
            let refused = refuse_outside_demo(&config, demo).unwrap_err();
            assert_eq!(refused.status.as_u16(), 401);
            assert!(refused.message.contains("demo software key"));
        }
        assert!(refuse_outside_demo(&config, &ordinary).is_ok());
        config.danger_accept_demo_key = true;
        assert!(refuse_outside_demo(&config, &by_aaguid).is_ok());
    }

    #[test]
    fn outside_the_demo_the_registry_holds_the_demo_key_revoked() {
        let mut config = crate::Config::default();
        let records = vec![
            record("alice", None),
            record(DEMO_PRINCIPAL, Some(DEMO_AAGUID)),
        ];
        let trusted = as_trusted(&config, records.clone());
        assert_eq!(
            trusted.iter().map(|r| r.revoked).collect::<Vec<_>>(),
            [false, true]
        );
        config.danger_accept_demo_key = true;
        assert_eq!(as_trusted(&config, records.clone()), records);
    }

    #[test]
    fn no_configuration_file_can_accept_the_demo_key() {
        let refused = crate::Config::from_toml("danger_accept_demo_key = true\n");
        assert!(refused.is_err(), "{refused:?}");
        assert!(!crate::Config::default().danger_accept_demo_key);
    }
}
