//! `countersign approve`: decide an approval from the terminal with a FIDO2 security key.
//!
//! The same steps as the approver page, through the bearer approver API:
//!
//! 1. fetch a sign-in challenge, which names the RP ID and the origins the service accepts, and
//!    refuse an `--origin` that is not among them before the key signs anything;
//! 2. sign in with the key's discoverable credential for the RP ID;
//! 3. without an approval id, list what waits for the approver and ask which to open;
//! 4. admit the approval's fields under its profile, show them as the page does (every field,
//!    the exact JSON, deceptive characters marked) and compute op_hash here;
//! 5. ask Approve / Refuse / Skip;
//! 6. fetch the decision challenge and refuse it unless its fields are the ones shown, its
//!    op_hash the one computed here and its challenge `nonce || op_hash`;
//! 7. build clientDataJSON, have the key sign it with user verification, submit the assertion
//!    and print the service's verdict;
//! 8. verify that verdict here with the core verifier, against the enrolled keys.
//!
//! Exit codes: 0 the decision was recorded as asked and verifies here (or nothing was chosen);
//! 1 the service refused the decision, the approval is settled already, or the result does not
//! verify here; 2 refused before signing (a wrong origin, a service that would have the key sign
//! something other than what was shown, a key that cannot verify its user) or unusable input.

mod api;
mod error;
// A build without a transport (neither `security-key` nor the test key) never reaches the CTAP2
// client. It is compiled all the same, so the default build type-checks the signing path.
#[cfg_attr(
    not(any(feature = "security-key", all(feature = "testing", debug_assertions))),
    allow(
        dead_code,
        reason = "no transport compiled in: only its refusal is reachable"
    )
)]
mod key;
mod review;
#[cfg(all(feature = "testing", debug_assertions))]
mod soft;

use crate::exit::{EXIT_ALLOW, EXIT_DENY};
use crate::profiles::ProfileArgs;
use api::Api;
use clap::Args;
use countersign::{ApprovalStatus, Decision, ProfileRegistry, b64};
use countersign_server::{AssertionBody, DecisionChallenge, ReviewView};
use error::ApproveError;
use key::{Authenticator, KeyRequest, Signed, client_data_json};
use review::Reviewed;
use std::io::Write as _;

// No doc comment here: the subcommand's help is the doc comment of `Command::Approve`.
#[derive(Args, Debug)]
pub(crate) struct ApproveArgs {
    /// The approval to decide (the id at the end of the approver link). Without it, the
    /// approvals waiting for you are listed and you pick one.
    approval_id: Option<String>,
    /// The service's base URL, e.g. https://approvals.example.com.
    #[arg(long, value_name = "URL")]
    service: String,
    /// The origin written into clientDataJSON, as the approver page's would be. Default: the
    /// first origin the service names. Refused before anything is signed unless the service
    /// accepts it.
    #[arg(long, value_name = "ORIGIN")]
    origin: Option<String>,
    /// The enrolled keys the result is verified against here: a registry file or URL. Default:
    /// the service's published registry (SERVICE/v1/registry); when it is not published, the
    /// local check is skipped with a warning.
    #[arg(long, value_name = "FILE|URL")]
    registry: Option<String>,
    #[command(flatten)]
    profiles: ProfileArgs,
    /// TEST ONLY: sign with the deterministic software key described in FILE instead of a USB
    /// key. Exists only in debug builds with the `testing` feature.
    #[cfg(all(feature = "testing", debug_assertions))]
    #[arg(long, hide = true, value_name = "FILE")]
    soft_ctap2_key: Option<std::path::PathBuf>,
}

pub(crate) fn run(args: &ApproveArgs) -> anyhow::Result<u8> {
    let profiles = args.profiles.registry()?;
    let mut api = Api::new(&args.service)?;
    let mut key = open_key(args, api.runtime())?;
    Ok(approve(args, &mut api, key.as_mut(), &profiles)?)
}

fn open_key(
    args: &ApproveArgs,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<Box<dyn Authenticator>> {
    #[cfg(all(feature = "testing", debug_assertions))]
    if let Some(path) = &args.soft_ctap2_key {
        return Ok(Box::new(soft::SoftCtap2::open(path, runtime)?));
    }
    let _ = args;
    Ok(Box::new(key::UsbKey::new(runtime)))
}

fn approve(
    args: &ApproveArgs,
    api: &mut Api,
    key: &mut dyn Authenticator,
    profiles: &ProfileRegistry,
) -> Result<u8, ApproveError> {
    let login = api.login_challenge()?;
    let origin = choose_origin(args.origin.as_deref(), &login.origins)?;
    let challenge = decode("the sign-in challenge", &login.challenge)?;
    let client_data = client_data_json(&challenge, &origin);
    let signed = key.sign(&KeyRequest {
        rp_id: &login.rp_id,
        client_data_json: &client_data,
        credential_id: None,
    })?;
    let session = api.login(&assertion(&signed, &client_data))?;
    say(&format!(
        "Signed in to {} as {}.",
        api.base(),
        session.principal
    ));
    let credential_id = signed.credential_id;
    let id = match &args.approval_id {
        Some(id) => id.clone(),
        None => match pick(api)? {
            Some(id) => id,
            None => return Ok(EXIT_ALLOW),
        },
    };
    let review = api.review(&id)?;
    if review.status != ApprovalStatus::Pending {
        say(&format!(
            "Approval {id} is settled already: {}. Nothing to sign.",
            review.status.as_str()
        ));
        return Ok(EXIT_DENY);
    }
    let reviewed = Reviewed::new(profiles, &review)?;
    say(&reviewed.render(&review));
    let Some(decision) = ask()? else {
        say("Skipped: nothing was signed.");
        return Ok(EXIT_ALLOW);
    };
    let issued = api.challenge(&id, decision)?;
    let challenge = check_challenge(&issued, &review, &reviewed, decision, &login.rp_id)?;
    let client_data = client_data_json(&challenge, &origin);
    let signed = key.sign(&KeyRequest {
        rp_id: &login.rp_id,
        client_data_json: &client_data,
        credential_id: Some(&credential_id),
    })?;
    let (result, sent) = match api.decide(&id, &assertion(&signed, &client_data)) {
        Ok(answer) => answer,
        Err(ApproveError::Service {
            what,
            status,
            message,
        }) => {
            eprintln!(
                "countersign: the service refused the decision ({what}, HTTP {status}): {message}"
            );
            return Ok(EXIT_DENY);
        }
        Err(e) => return Err(e),
    };
    say(&format!(
        "The service recorded approval {id} as {}{}.",
        result.status.as_str(),
        result
            .reason_code
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    ));
    let recorded = result.status == ApprovalStatus::from(decision);
    let policy = serde_json::json!({
        "rp_id": login.rp_id,
        "origins": [origin],
        "quorum": 1,
        "require_evidence": true,
        "require_user_verification": true,
    });
    let checked = check_here(api, args, profiles, &review, &reviewed, &policy, &sent)?;
    Ok(if recorded && checked {
        EXIT_ALLOW
    } else {
        EXIT_DENY
    })
}

/// The origin to sign with: the one asked for if the service accepts it, else the service's
/// first.
fn choose_origin(asked: Option<&str>, allowed: &[String]) -> Result<String, ApproveError> {
    let Some(asked) = asked else {
        return allowed
            .first()
            .map(|o| o.trim_end_matches('/').to_owned())
            .ok_or(ApproveError::NoOrigin);
    };
    let asked = asked.trim_end_matches('/');
    allowed
        .iter()
        .map(|o| o.trim_end_matches('/'))
        .find(|o| o.eq_ignore_ascii_case(asked))
        .map(str::to_owned)
        .ok_or_else(|| ApproveError::OriginNotAllowed {
            origin: asked.to_owned(),
            allowed: allowed.to_vec(),
        })
}

/// The decision challenge must be for exactly what was shown: the same approval, decision,
/// profile and fields, op_hash as computed here, and `nonce || op_hash` as the bytes to sign.
/// Returns those bytes.
fn check_challenge(
    issued: &DecisionChallenge,
    review: &ReviewView,
    reviewed: &Reviewed<'_>,
    decision: Decision,
    rp_id: &str,
) -> Result<Vec<u8>, ApproveError> {
    if issued.rp_id != rp_id {
        return Err(ApproveError::RpIdChanged {
            login: rp_id.to_owned(),
            decision: issued.rp_id.clone(),
        });
    }
    let local = reviewed.op_hash(decision);
    let service = decode("the op_hash", &issued.op_hash)?;
    if service != local {
        return Err(ApproveError::OpHashMismatch {
            decision: decision.as_str(),
            service: issued.op_hash.clone(),
            local: b64::encode(&local),
        });
    }
    let same_fields =
        countersign::admit_fields(reviewed.profile, issued.fields.to_string().as_bytes())
            .is_ok_and(|f| f.jcs() == reviewed.fields.jcs());
    if issued.approval_id != review.approval_id
        || issued.decision != decision
        || issued.profile != review.profile
        || !same_fields
    {
        return Err(ApproveError::FieldsChanged);
    }
    let nonce: [u8; countersign::NONCE_LEN] = decode("the nonce", &issued.nonce)?
        .try_into()
        .map_err(|_| ApproveError::ChallengeMismatch)?;
    let expected = countersign::decision_challenge(&nonce, &local);
    let challenge = decode("the challenge", &issued.challenge)?;
    if challenge != expected {
        return Err(ApproveError::ChallengeMismatch);
    }
    Ok(challenge)
}

/// Verify the service's result (as sent) here, with the core verifier, under `policy`: the
/// service's RP ID and the origin signed with. Prints the verdict; whether it holds.
fn check_here(
    api: &Api,
    args: &ApproveArgs,
    profiles: &ProfileRegistry,
    review: &ReviewView,
    reviewed: &Reviewed<'_>,
    policy: &serde_json::Value,
    result: &serde_json::Value,
) -> Result<bool, ApproveError> {
    let source = args
        .registry
        .clone()
        .unwrap_or_else(|| format!("{}/v1/registry", api.base()));
    let registry = if source.starts_with("http://") || source.starts_with("https://") {
        api.fetch(&source)
    } else {
        std::fs::read(&source).map_err(|e| ApproveError::Transport {
            what: format!("reading {source}"),
            reason: e.to_string(),
        })
    };
    let registry: serde_json::Value = match registry.and_then(|bytes| {
        serde_json::from_slice(&bytes).map_err(|e| ApproveError::Transport {
            what: format!("reading the registry {source}"),
            reason: e.to_string(),
        })
    }) {
        Ok(registry) => registry,
        Err(e) => {
            eprintln!(
                "countersign: warning: not verified here ({e}); pass --registry with the \
                 enrolled keys you trust"
            );
            return Ok(true);
        }
    };
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let case = serde_json::json!({
        "action": {
            "profile": review.profile,
            "fields": reviewed.fields.as_value(),
            "tool": review.tool_name,
        },
        "result": result,
        "registry": registry,
        "policy": policy,
        "now": now,
    });
    let mut case = countersign::Case::from_json(case.to_string().as_bytes()).map_err(|e| {
        ApproveError::Inadmissible {
            profile: review.profile.clone(),
            reason: format!("the result does not form a verifiable case: {e}"),
        }
    })?;
    case.policy.profiles = profiles.clone();
    let verdict = case.verify_with(
        countersign::webauthn::default_backend(),
        &mut countersign::MemoryReplayState::new(),
    );
    let refused = verdict.reason_code == Some(countersign::ReasonCode::ApproverRefused);
    let ok = verdict.is_allow() || refused;
    say(&format!(
        "Verified here against {source}: {}{} (identity assurance {}){}",
        if verdict.is_allow() { "ALLOW" } else { "DENY" },
        verdict
            .reason_code
            .map(|r| format!(" {}", r.as_str()))
            .unwrap_or_default(),
        serde_json::to_value(verdict.identity_assurance.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        if refused {
            ": your signed refusal"
        } else if ok {
            ""
        } else {
            ": the recorded evidence does NOT verify"
        },
    ));
    Ok(ok)
}

/// List what waits for the approver and ask which to open.
fn pick(api: &Api) -> Result<Option<String>, ApproveError> {
    let inbox = api.inbox()?;
    if inbox.pending.is_empty() {
        say("Nothing waits for you.");
        return Ok(None);
    }
    let mut rows = vec![[
        "#".to_owned(),
        "APPROVAL".to_owned(),
        "KIND".to_owned(),
        "TOOL".to_owned(),
        "SEVERITY".to_owned(),
        "EXPIRES".to_owned(),
    ]];
    for (n, p) in inbox.pending.iter().enumerate() {
        rows.push([
            (n + 1).to_string(),
            p.approval_id.clone(),
            p.kind.clone(),
            p.tool_name.clone(),
            p.severity.clone(),
            p.expires_at.clone(),
        ]);
    }
    say(&table(&rows));
    let answer = prompt("Open which one? (number or id; Enter for none): ")?;
    let answer = answer.trim();
    if answer.is_empty() {
        return Ok(None);
    }
    let chosen = answer
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| inbox.pending.get(i))
        .or_else(|| inbox.pending.iter().find(|p| p.approval_id == answer));
    match chosen {
        Some(p) => Ok(Some(p.approval_id.clone())),
        None => {
            say(&format!(
                "{answer:?} is not in the list; nothing was opened."
            ));
            Ok(None)
        }
    }
}

/// Columns as wide as their widest cell, two spaces apart; cells go through the same
/// no-control rule as the review.
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let clean = |s: &str| -> String { s.chars().filter(|c| !c.is_control()).collect() };
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(clean(cell).chars().count());
        }
    }
    rows.iter()
        .map(|row| {
            row.iter()
                .zip(widths)
                .map(|(cell, w)| format!("{:<w$}", clean(cell)))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Approve, Refuse or Skip (`None`); end of input is Skip.
fn ask() -> Result<Option<Decision>, ApproveError> {
    loop {
        let answer = prompt("Approve, Refuse or Skip? [a/r/s]: ")?;
        if answer.is_empty() {
            return Ok(None);
        }
        match answer.trim().to_ascii_lowercase().as_str() {
            "a" | "approve" => return Ok(Some(Decision::Approved)),
            "r" | "refuse" => return Ok(Some(Decision::Denied)),
            "s" | "skip" => return Ok(None),
            _ => eprintln!("countersign: answer a, r or s"),
        }
    }
}

/// One line from stdin after a prompt on stderr ("" at the end of input).
fn prompt(question: &str) -> Result<String, ApproveError> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| ApproveError::Transport {
            what: "reading the answer".to_owned(),
            reason: e.to_string(),
        })?;
    Ok(line)
}

fn assertion(signed: &Signed, client_data_json: &[u8]) -> AssertionBody {
    AssertionBody {
        credential_id: b64::encode(&signed.credential_id),
        client_data_json: b64::encode(client_data_json),
        authenticator_data: b64::encode(&signed.authenticator_data),
        signature: b64::encode(&signed.signature),
    }
}

fn decode(what: &str, text: &str) -> Result<Vec<u8>, ApproveError> {
    b64::decode(text).map_err(|_| ApproveError::Transport {
        what: format!("reading {what}"),
        reason: "not base64url".to_owned(),
    })
}

fn say(text: &str) {
    let _ = writeln!(std::io::stdout(), "{text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_origin_must_be_one_the_service_accepts() {
        let allowed = vec!["https://approve.example.com/".to_owned()];
        assert_eq!(
            choose_origin(None, &allowed).unwrap(),
            "https://approve.example.com"
        );
        assert_eq!(
            choose_origin(Some("https://APPROVE.example.com/"), &allowed).unwrap(),
            "https://approve.example.com"
        );
        assert!(matches!(
            choose_origin(Some("https://evil.example"), &allowed),
            Err(ApproveError::OriginNotAllowed { .. })
        ));
        assert!(matches!(
            choose_origin(None, &[]),
            Err(ApproveError::NoOrigin)
        ));
    }
}
