//! `countersign credential`: list the enrolled credentials, revoke a lost or retired one.

use crate::exit::{EXIT_ALLOW, EXIT_DENY, EXIT_UNUSABLE};
use crate::store::StoreArgs;
use crate::table::{self, Column};
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub(crate) enum CredentialCommand {
    /// List the enrolled credentials of a service's data directory (or database).
    ///
    /// One line per credential: principal, credential id (base64url, what `credential revoke`
    /// takes), algorithm, AAGUID (the authenticator model, `-` when unknown), attestation
    /// (format, and `verified` when its chain verified at enrollment) and whether it is revoked.
    /// `--json` prints the same as a JSON array. Exit 0, or 2 when the data directory or
    /// database cannot be opened.
    List {
        #[command(flatten)]
        store: StoreArgs,
        /// Print a JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a credential: its key can no longer log in or decide.
    ///
    /// Marks the credential `revoked: true` in the database and appends a `revocation` line
    /// (principal, credential id, your --reason) to the signed audit log, in one transaction.
    /// It works whether the service is running or stopped: a running service (every replica)
    /// notices within about half a second and from then on refuses the key's logins, its open
    /// sessions and its decisions with `credential_revoked`. `registry export` shows the record
    /// with `revoked: true`, so offline verifiers refuse it too once they take the new export.
    ///
    /// A revocation is final: a registry file that still lists the key does not bring it back at
    /// the next start. To let the person approve again, invite them to enroll a new key
    /// (`countersign enroll invite`). Find CREDENTIAL_ID with `countersign credential list`.
    ///
    /// Exit codes: 0 revoked, 1 already revoked (nothing changed), 2 unknown credential or
    /// unusable input (not base64url, empty reason, no data directory, database unreachable).
    #[command(after_help = "Example:\n  countersign credential revoke \
                            AbC123-_xyz --reason 'YubiKey lost on 2026-12-01' \
                            --data-dir /var/lib/countersign")]
    Revoke {
        /// The credential id, base64url (as `credential list` and `registry export` print it).
        credential_id: String,
        /// Why, in a few words; recorded in the signed audit log for auditors.
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub(crate) fn run(command: CredentialCommand) -> anyhow::Result<u8> {
    match command {
        CredentialCommand::List { store, json } => list(&store, json),
        CredentialCommand::Revoke {
            credential_id,
            reason,
            store,
        } => revoke(&credential_id, &reason, &store),
    }
}

/// One row of `credential list`.
#[derive(serde::Serialize)]
struct CredentialRow {
    principal: String,
    credential_id: String,
    algorithm: &'static str,
    aaguid: Option<String>,
    attestation_format: Option<String>,
    chain_verified: bool,
    revoked: bool,
}

fn algorithm_name(public_key: &[u8]) -> &'static str {
    use countersign::webauthn::{CoseAlgorithm, CosePublicKey};
    match CosePublicKey::from_cose(public_key).map(|k| k.algorithm()) {
        Ok(CoseAlgorithm::Es256) => "ES256",
        Ok(CoseAlgorithm::Es384) => "ES384",
        Ok(CoseAlgorithm::EdDsa) => "EdDSA",
        Ok(CoseAlgorithm::Rs256) => "RS256",
        Ok(_) => "other",
        Err(_) => "unsupported",
    }
}

fn list(store: &StoreArgs, json: bool) -> anyhow::Result<u8> {
    let store = store.open()?;
    let rows: Vec<CredentialRow> = store
        .credentials()?
        .into_iter()
        .map(|c| CredentialRow {
            algorithm: algorithm_name(&c.public_key),
            credential_id: countersign::b64::encode(&c.credential_id),
            aaguid: c.aaguid.map(|a| a.to_string()),
            attestation_format: c.attestation.as_ref().map(|a| a.format.clone()),
            chain_verified: c.attestation.as_ref().is_some_and(|a| a.chain_verified),
            revoked: c.revoked,
            principal: c.principal,
        })
        .collect();
    let columns = [
        Column::left("PRINCIPAL"),
        Column::left("CREDENTIAL ID"),
        Column::left("ALG"),
        Column::left("AAGUID"),
        Column::left("ATTESTATION"),
        Column::left("STATUS"),
    ];
    table::print(&rows, json, "no credential enrolled", columns, |r| {
        let attestation = match (&r.attestation_format, r.chain_verified) {
            (Some(format), true) => format!("{format} verified"),
            (Some(format), false) => format.clone(),
            (None, _) => "-".to_owned(),
        };
        [
            r.principal.clone(),
            r.credential_id.clone(),
            r.algorithm.to_owned(),
            r.aaguid.clone().unwrap_or_else(|| "-".to_owned()),
            attestation,
            if r.revoked { "REVOKED" } else { "active" }.to_owned(),
        ]
    })
}

fn revoke(credential_id: &str, reason: &str, store: &StoreArgs) -> anyhow::Result<u8> {
    use countersign_server::store::RevokeOutcome;
    let Ok(id) = countersign::b64::decode(credential_id.trim()) else {
        eprintln!(
            "countersign: {credential_id:?} is not a base64url credential id (see `countersign \
             credential list`)"
        );
        return Ok(EXIT_UNUSABLE);
    };
    let reason = reason.trim();
    if reason.is_empty() {
        eprintln!("countersign: --reason must say why (it is recorded in the audit log)");
        return Ok(EXIT_UNUSABLE);
    }
    let store = store.open()?;
    let now = countersign_server::clock::system_now_ms();
    let encoded = countersign::b64::encode(&id);
    Ok(
        match countersign_server::store::revoke(store.as_ref(), &id, reason, now)? {
            RevokeOutcome::Revoked => {
                eprintln!(
                    "countersign: revoked {encoded}; a running service refuses it within a \
                     second, and the audit log records the revocation"
                );
                EXIT_ALLOW
            }
            RevokeOutcome::AlreadyRevoked => {
                eprintln!("countersign: {encoded} was already revoked; nothing changed");
                EXIT_DENY
            }
            RevokeOutcome::NotFound => {
                eprintln!(
                    "countersign: no enrolled credential has id {encoded} (see `countersign \
                     credential list`)"
                );
                EXIT_UNUSABLE
            }
        },
    )
}
