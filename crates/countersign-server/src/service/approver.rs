//! The approver's side: authenticate, see the action, fetch a challenge, submit the assertion.
//!
//! Login is a WebAuthn assertion over a 32-byte server nonce; a decision challenge is 64 bytes
//! (`nonce || op_hash(decision)`). The lengths differ on purpose, so a login assertion can never
//! pass as evidence for an action and an action's evidence can never open a session.

use super::AppState;
use crate::audit::AuditEvent;
use crate::clock::{from_ms, rfc3339};
use crate::error::{ApiError, ErrorCode, NotNfc};
use crate::store::{ApprovalRecord, IssuedChallenge, Session, SettleKind, Settlement, Spend};
use countersign::webauthn::{self, Assertion, AssertionExpectations, ClientData};
use countersign::{
    Action, ApprovalResult, ApprovalStatus, CredentialRegistry, Decision, EvidenceEntry,
    ReasonCode, ReplayState, WEBAUTHN_ASSERTION_FORMAT, b64, verify_evidence,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// A login challenge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoginChallenge {
    /// base64url of 32 random bytes: the WebAuthn `challenge`.
    pub challenge: String,
    pub rp_id: String,
    /// The origins the service accepts in clientDataJSON (the approver page's), so that a client
    /// that writes clientDataJSON itself (`countersign approve`) can refuse a wrong one before
    /// the authenticator signs anything.
    #[serde(default)]
    pub origins: Vec<String>,
    pub expires_at: String,
}

/// The three byte strings an authenticator returns, and which credential made them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssertionBody {
    pub credential_id: String,
    pub client_data_json: String,
    pub authenticator_data: String,
    pub signature: String,
}

/// A session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoginResponse {
    /// Bearer token for the approver endpoints.
    pub token: String,
    pub principal: String,
    pub expires_at: String,
}

/// What an authenticated approver sees before deciding: every material field, as signed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReviewView {
    pub approval_id: String,
    pub status: ApprovalStatus,
    pub agent_id: String,
    pub tool_name: String,
    pub profile: String,
    /// The admitted (NFC) fields the op_hash covers.
    pub fields: Value,
    pub severity: String,
    pub expires_at: String,
    /// Under a tool rule with `nfc = "normalize"`: every submitted string NFC changed. Empty
    /// otherwise (under `require` such a request is never admitted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_nfc: Vec<NotNfc>,
    /// When `not_nfc` is not empty: the fields as the gateway submitted them, the strings the
    /// gateway will execute. `fields` is what is signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted_fields: Option<Value>,
    /// The code points of `not_nfc`, per JSON pointer (what the approver page marks).
    #[serde(skip)]
    pub(crate) nfc_marks: std::collections::BTreeMap<String, Vec<char>>,
}

/// The [`ReviewView`] members about NFC; all empty unless the tool normalizes and NFC changed
/// something.
#[derive(Debug, Default)]
struct NfcView {
    not_nfc: Vec<NotNfc>,
    submitted_fields: Option<Value>,
    marks: std::collections::BTreeMap<String, Vec<char>>,
}

/// A decision challenge.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionChallenge {
    pub approval_id: String,
    pub decision: Decision,
    pub profile: String,
    pub fields: Value,
    pub nonce: String,
    pub op_hash: String,
    /// base64url(nonce || op_hash): the WebAuthn `challenge` to sign.
    pub challenge: String,
    pub rp_id: String,
    pub expires_at: String,
}

/// A replay state read from the database for one assertion; the store re-checks on commit.
struct Snapshot {
    spent: bool,
    count: Option<u32>,
}

impl ReplayState for Snapshot {
    fn is_spent(&self, _nonce: &[u8]) -> bool {
        self.spent
    }
    fn sign_count(&self, _credential_id: &[u8]) -> Option<u32> {
        self.count
    }
    fn record(&mut self, _nonce: &[u8], _credential_id: &[u8], _sign_count: u32) {}
}

fn decode(field: &'static str, text: &str) -> Result<Vec<u8>, ApiError> {
    b64::decode(text).map_err(|_| not_base64(field))
}

fn not_base64(field: &'static str) -> ApiError {
    ApiError::bad_request(
        ErrorCode::InvalidRequest,
        format!("{field} is not base64url"),
    )
}

/// The nonce half of a decision challenge (`nonce || op_hash`, split by the core).
fn decision_nonce(client_data: &ClientData) -> Result<Vec<u8>, ApiError> {
    countersign::split_decision_challenge(&client_data.challenge)
        .map(|(nonce, _)| nonce.to_vec())
        .ok_or_else(|| {
            ApiError::unprocessable(
                ReasonCode::BindingMismatch,
                "the signed challenge is not nonce(32) || op_hash(32)",
            )
        })
}

fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl AppState {
    /// Issue a login challenge.
    pub async fn login_challenge(&self) -> Result<LoginChallenge, ApiError> {
        let nonce = crate::random::bytes::<{ countersign::NONCE_LEN }>()?;
        let expires_at = self.now_ms().saturating_add(self.max_age_ms());
        self.blocking(move |s| s.put_login_challenge(&nonce, expires_at))
            .await?;
        Ok(LoginChallenge {
            challenge: b64::encode(&nonce),
            rp_id: self.config().rp_id.clone(),
            origins: self.config().origins.clone(),
            expires_at: rfc3339(from_ms(expires_at)),
        })
    }

    fn max_age_ms(&self) -> i64 {
        crate::clock::secs_to_ms(self.config().timeouts.assertion_max_age_seconds)
    }

    /// Verify a login assertion and open a session.
    pub async fn login(&self, body: AssertionBody) -> Result<LoginResponse, ApiError> {
        let credential_id = decode("credential_id", &body.credential_id)?;
        let client_data_json = decode("client_data_json", &body.client_data_json)?;
        let authenticator_data = decode("authenticator_data", &body.authenticator_data)?;
        let signature = decode("signature", &body.signature)?;
        let registry = self.registry();
        let credential = registry.get(&credential_id).ok_or_else(|| {
            ApiError::unauthorized("credential is not enrolled")
                .reason(ReasonCode::CredentialUnknown)
        })?;
        crate::demo::refuse_outside_demo(self.config(), credential.record())?;
        if credential.record().revoked {
            return Err(ApiError::unauthorized("credential is revoked")
                .reason(ReasonCode::CredentialRevoked));
        }
        let key = credential.key().map_err(|e| {
            ApiError::unauthorized(e.to_string()).reason(ReasonCode::UnsupportedAlgorithm)
        })?;
        let client_data = ClientData::parse(&client_data_json)
            .map_err(|e| ApiError::unauthorized(e.to_string()).reason(e.reason_code()))?;
        let nonce = client_data.challenge.clone();
        let now = self.now_ms();
        let taken = self
            .blocking(move |s| s.take_login_challenge(&nonce, now))
            .await?;
        if !taken {
            return Err(
                ApiError::unauthorized("login challenge unknown, used or expired")
                    .reason(ReasonCode::Replayed),
            );
        }
        let cid = credential_id.clone();
        let (_, stored) = self.blocking(move |s| s.replay_snapshot(&[], &cid)).await?;
        let config = self.config();
        let expectations = AssertionExpectations {
            stored_sign_count: stored.unwrap_or(0).max(credential.record().sign_count),
            backup_eligible: credential.record().backup_eligible,
            // The demo key signs user presence only (crate::demo): no one was verified, and its
            // evidence says so. Outside the demo it was refused above.
            require_user_verification: !crate::demo::is_demo_credential(credential.record()),
            ..AssertionExpectations::new(&client_data.challenge, &config.rp_id, &config.origins)
        };
        let assertion = Assertion {
            client_data_json: &client_data_json,
            authenticator_data: &authenticator_data,
            signature: &signature,
        };
        let verified =
            webauthn::verify_assertion(key, &assertion, &expectations, webauthn::default_backend())
                .map_err(|e| ApiError::unauthorized(e.to_string()).reason(e.reason_code()))?;
        let token = b64::encode(&crate::random::bytes::<32>()?);
        let session_ttl = crate::clock::secs_to_ms(config.timeouts.session_seconds);
        let session = Session {
            principal: credential.principal().to_owned(),
            credential_id,
            expires_at: now.saturating_add(session_ttl),
        };
        let hash = token_hash(&token);
        let stored_session = session.clone();
        let count = verified.sign_count;
        let created = self
            .blocking(move |s| s.create_session(&hash, &stored_session, count))
            .await?;
        if !created {
            return Err(ApiError::unauthorized("signature counter regressed")
                .reason(ReasonCode::CounterRegression));
        }
        Ok(LoginResponse {
            token,
            principal: session.principal,
            expires_at: rfc3339(from_ms(session.expires_at)),
        })
    }

    /// The session behind a bearer token.
    pub async fn authenticate(&self, token: &str) -> Result<Session, ApiError> {
        let hash = token_hash(token);
        let now = self.now_ms();
        let session = self
            .blocking(move |s| s.session(&hash, now))
            .await?
            .ok_or_else(|| ApiError::unauthorized("unknown or expired session"))?;
        // A session the demo key opened in a demo ends when the data directory is served
        // by anything else.
        if let Some(credential) = self.registry().get(&session.credential_id) {
            crate::demo::refuse_outside_demo(self.config(), credential.record())?;
        }
        // A session opened before its credential was revoked ends with the revocation.
        if self
            .registry()
            .get(&session.credential_id)
            .is_some_and(|c| c.record().revoked)
        {
            return Err(
                ApiError::unauthorized("the credential of this session is revoked")
                    .reason(ReasonCode::CredentialRevoked),
            );
        }
        Ok(session)
    }

    /// End the session behind a bearer token or cookie (logout): deleted in the store, so the
    /// token is refused from then on by every replica. Unknown tokens are not an error (a
    /// repeated logout is harmless and tells nothing).
    pub async fn logout(&self, token: &str) -> Result<(), ApiError> {
        let hash = token_hash(token);
        self.blocking(move |s| s.delete_session(&hash)).await?;
        Ok(())
    }

    pub(crate) fn check_eligible(&self, tool_name: &str, principal: &str) -> Result<(), ApiError> {
        let eligible = self.eligible_principals(self.config().rule(tool_name));
        if eligible.is_some_and(|set| !set.iter().any(|p| p == principal)) {
            return Err(ApiError::forbidden(
                ErrorCode::NotEligible,
                format!("{principal} may not decide {tool_name}"),
            ));
        }
        Ok(())
    }

    /// The action as an approver must see it before deciding.
    pub async fn review(&self, id: &str, session: &Session) -> Result<ReviewView, ApiError> {
        let record = self.load(id).await?;
        self.check_eligible(&record.tool_name, &session.principal)?;
        let fields = self.admitted_fields(&record.profile, &record.fields_json)?;
        let NfcView {
            not_nfc,
            submitted_fields,
            marks: nfc_marks,
        } = self.nfc_view(&record)?;
        Ok(ReviewView {
            approval_id: record.id,
            status: record.status,
            agent_id: record.agent_id,
            tool_name: record.tool_name,
            profile: record.profile,
            fields,
            severity: record.severity,
            expires_at: rfc3339(from_ms(record.expires_at)),
            not_nfc,
            submitted_fields,
            nfc_marks,
        })
    }

    /// What NFC changed in a stored request's submitted fields, for a tool that normalizes.
    fn nfc_view(&self, record: &crate::store::ApprovalRecord) -> Result<NfcView, ApiError> {
        if self.config().rule(&record.tool_name).nfc != countersign::NfcMode::Normalize {
            return Ok(Default::default());
        }
        let profile = self
            .profiles()
            .get(&record.profile)
            .ok_or_else(|| ApiError::internal("stored approval names an unpinned profile"))?;
        let changes = countersign::nfc_changes(profile, record.fields_json.as_bytes())
            .map_err(ApiError::internal)?;
        if changes.is_empty() {
            return Ok(Default::default());
        }
        // Admission already refused duplicate keys and out-of-range numbers, so the plain parse
        // reads the same value, with the strings as submitted.
        let submitted: Value =
            serde_json::from_str(&record.fields_json).map_err(ApiError::internal)?;
        Ok(NfcView {
            not_nfc: changes.iter().map(NotNfc::from).collect(),
            submitted_fields: Some(submitted),
            marks: changes
                .into_iter()
                .map(|c| (c.path, c.code_points))
                .collect(),
        })
    }

    fn admitted_fields(&self, profile: &str, fields_json: &str) -> Result<Value, ApiError> {
        let profile = self
            .profiles()
            .get(profile)
            .ok_or_else(|| ApiError::internal("stored approval names an unpinned profile"))?;
        countersign::admit_fields(profile, fields_json.as_bytes())
            .map(|f| f.as_value().clone())
            .map_err(ApiError::internal)
    }

    /// Issue the challenge for one decision on one PENDING approval.
    pub async fn decision_challenge(
        &self,
        id: &str,
        decision: Decision,
        session: &Session,
    ) -> Result<DecisionChallenge, ApiError> {
        let record = self.load(id).await?;
        self.check_decidable(&record, session)?;
        let op_hash = *op_hash_of(&record, decision);
        let nonce = crate::random::bytes::<{ countersign::NONCE_LEN }>()?;
        let expires_at = record
            .expires_at
            .min(self.now_ms().saturating_add(self.max_age_ms()));
        let issued = IssuedChallenge {
            nonce: nonce.to_vec(),
            approval_id: record.id.clone(),
            decision,
            principal: session.principal.clone(),
            expires_at,
        };
        self.blocking(move |s| s.put_challenge(&issued)).await?;
        let challenge = countersign::decision_challenge(&nonce, &op_hash);
        Ok(DecisionChallenge {
            fields: self.admitted_fields(&record.profile, &record.fields_json)?,
            approval_id: record.id,
            decision,
            profile: record.profile,
            nonce: b64::encode(&nonce),
            op_hash: b64::encode(&op_hash),
            challenge: b64::encode(&challenge),
            rp_id: self.config().rp_id.clone(),
            expires_at: rfc3339(from_ms(expires_at)),
        })
    }

    /// Accept an assertion as the verdict on `id`, after the core verifier accepted it.
    ///
    /// Each step below answers its own refusal, in this order (a test pins it): the approval,
    /// the approver's right to decide it, the body, the credential, the issued challenge, the
    /// core's verdict on the evidence, and at last the commit, where the first verdict wins and
    /// expiry is judged at commit time.
    pub async fn decide(
        &self,
        id: &str,
        body: AssertionBody,
        session: &Session,
    ) -> Result<ApprovalResult, ApiError> {
        let body = DecisionBody::read(body);
        let (record, lookup) = self.read_for_decision(id, body.lookup_key()).await?;
        let record = record.ok_or_else(|| ApiError::not_found("approval"))?;
        let record = self.settle_if_overdue(record).await?;
        self.check_decidable(&record, session)?;
        let (credential_id, client_data_json) = (body.credential_id?, body.client_data_json?);
        let registry = self.registry();
        let credential = own_credential(&registry, &credential_id, session)?;
        crate::demo::refuse_outside_demo(self.config(), credential.record())?;
        let nonce = body.nonce?;
        let (issued, (spent, count)) =
            lookup.ok_or_else(|| ApiError::internal("replay state not read"))?;
        let now = self.now_ms();
        let issued = check_issued(issued, &record, session, now)?;
        let entry = EvidenceEntry {
            format: WEBAUTHN_ASSERTION_FORMAT.to_owned(),
            decision: issued.decision,
            canonicalization_profile: record.profile.clone(),
            credential_id,
            client_data_json,
            authenticator_data: decode("authenticator_data", &body.authenticator_data)?,
            signature: decode("signature", &body.signature)?,
            aaguid: credential.record().aaguid.map(|a| a.to_string()),
            attestation_ref: None,
            nonce,
            op_hash: op_hash_of(&record, issued.decision).to_vec(),
            assertion_at: rfc3339(from_ms(now)),
            co_signatures: Vec::new(),
        };
        let accepted =
            self.verify_decision(&record, &entry, &registry, Snapshot { spent, count }, now)?;
        self.commit_verdict(&record, entry, accepted).await
    }

    /// Read the approval and, when the body named a challenge, the issued challenge and the
    /// replay state, in one store trip.
    async fn read_for_decision(
        &self,
        id: &str,
        lookup: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Result<(Option<ApprovalRecord>, Option<ChallengeLookup>), ApiError> {
        let key = id.to_owned();
        self.blocking(move |s| {
            let Some(record) = s.get(&key)? else {
                return Ok((None, None));
            };
            let found = match lookup {
                Some((nonce, credential)) => Some((
                    s.challenge(&nonce)?,
                    s.replay_snapshot(&nonce, &credential)?,
                )),
                None => None,
            };
            Ok((Some(record), found))
        })
        .await
    }

    /// An approval this approver may still decide: eligible for its tool, and PENDING (else 409
    /// with the verdict that won).
    fn check_decidable(&self, record: &ApprovalRecord, session: &Session) -> Result<(), ApiError> {
        self.check_eligible(&record.tool_name, &session.principal)?;
        // Separation of duties: the principal a request is made for never decides it (an ARAP
        // request's subject is its agent_id, docs/spec/arap.md).
        if record.agent_id == session.principal {
            return Err(ApiError::forbidden(
                ErrorCode::SelfApproval,
                format!(
                    "{} may not decide a request made for themself",
                    session.principal
                ),
            ));
        }
        if record.status != ApprovalStatus::Pending {
            return Err(self.already_settled(record));
        }
        Ok(())
    }

    /// The core verifier's verdict on the evidence, under the tool's policy: who may decide
    /// (groups expanded), which tool may use a typed profile, the NFC rule — all re-checked as an
    /// offline verifier would. A refusal the approver signed is accepted as a verdict too.
    fn verify_decision(
        &self,
        record: &ApprovalRecord,
        entry: &EvidenceEntry,
        registry: &CredentialRegistry,
        mut replay: Snapshot,
        now: i64,
    ) -> Result<Accepted, ApiError> {
        let mut result = ApprovalResult::bare(entry.decision.into());
        result.approval_id = Some(record.id.clone());
        result.approver_evidence = vec![entry.clone().into()];
        let policy = self.policy(&record.tool_name);
        let action = Action::new(record.profile.clone(), record.fields_json.clone())
            .with_tool(record.tool_name.clone());
        let started = std::time::Instant::now();
        let verdict = verify_evidence(
            &policy,
            &action,
            &result,
            registry,
            &mut replay,
            from_ms(now),
        );
        self.metrics().verified(
            if verdict.is_allow() { "ALLOW" } else { "DENY" },
            verdict.reason_code.map(ReasonCode::as_str),
            started.elapsed().as_secs_f64(),
        );
        let refused = verdict.reason_code == Some(ReasonCode::ApproverRefused);
        let accepted = verdict.is_allow() || refused;
        let reason = verdict.reason_code.unwrap_or(ReasonCode::EvidenceMalformed);
        match verdict.approvers.into_iter().next() {
            Some(approver) if accepted => Ok(Accepted { approver, refused }),
            _ => Err(ApiError::unprocessable(
                reason,
                verdict
                    .detail
                    .unwrap_or_else(|| format!("evidence rejected: {reason}")),
            )),
        }
    }

    /// Commit an accepted verdict: the nonce spent, the counter moved, the Decision line and
    /// (for an approval) the grant window, in one transaction that only a PENDING approval
    /// takes. The first verdict wins; a later one is answered 409 with the winner.
    async fn commit_verdict(
        &self,
        record: &ApprovalRecord,
        entry: EvidenceEntry,
        Accepted { approver, refused }: Accepted,
    ) -> Result<ApprovalResult, ApiError> {
        let evidence = serde_json::to_value(&entry).map_err(ApiError::internal)?;
        let assurance =
            serde_json::to_value(&approver.identity_assurance).map_err(ApiError::internal)?;
        let status: ApprovalStatus = entry.decision.into();
        let grant_ttl = crate::clock::secs_to_ms(self.config().timeouts.grant_seconds);
        // The compare-and-set runs at commit time, not at the time read before verification:
        // a verdict that finished verifying after the window closed is late (docs/spec/service.md
        // §2, "expiry is exact and wins ties"). The store never reads a clock, so the time is
        // re-read here, just before the transaction, and the decision line and grant window
        // start from it too.
        let now = self.now_ms();
        let settlement = Settlement {
            approval_id: record.id.clone(),
            now,
            status,
            reason_code: refused.then_some(ReasonCode::ApproverRefused),
            kind: SettleKind::Verdict {
                spend: Spend {
                    nonce: entry.nonce,
                    credential_id: entry.credential_id,
                    sign_count: approver.sign_count,
                },
                evidence_json: Value::Array(vec![evidence.clone()]).to_string(),
            },
            grant_expires_at: (status == ApprovalStatus::Approved)
                .then(|| now.saturating_add(grant_ttl)),
            event: AuditEvent::decision(
                &record.id,
                &rfc3339(from_ms(now)),
                status.as_str(),
                &approver.principal,
                &assurance,
                &evidence,
            )
            .with_member(
                "authority",
                decision_authority(record, status, now, grant_ttl),
            ),
        };
        let outcome = self.committing(move |s| s.settle(&settlement)).await?;
        self.settled_outcome(outcome)
    }
}

/// What `decide` reads from the body before any I/O. Which challenge was signed is named by its
/// nonce, inside clientDataJSON: reading it first lets the approval, the issued challenge and the
/// replay state come back in one store trip. Decoding errors are kept, not raised, so that the
/// checks still fail in the order `decide` documents.
struct DecisionBody {
    credential_id: Result<Vec<u8>, ApiError>,
    client_data_json: Result<Vec<u8>, ApiError>,
    nonce: Result<Vec<u8>, ApiError>,
    authenticator_data: String,
    signature: String,
}

impl DecisionBody {
    fn read(body: AssertionBody) -> Self {
        let client_data_json = decode("client_data_json", &body.client_data_json);
        let nonce = client_data_json
            .as_ref()
            .map_err(|_| not_base64("client_data_json"))
            .and_then(|c| {
                let client_data = ClientData::parse(c)
                    .map_err(|e| ApiError::unprocessable(e.reason_code(), e.to_string()))?;
                decision_nonce(&client_data)
            });
        Self {
            credential_id: decode("credential_id", &body.credential_id),
            client_data_json,
            nonce,
            authenticator_data: body.authenticator_data,
            signature: body.signature,
        }
    }

    /// The (nonce, credential id) to read the challenge and replay state by, when both decoded.
    fn lookup_key(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        match (&self.nonce, &self.credential_id) {
            (Ok(nonce), Ok(credential)) => Some((nonce.clone(), credential.clone())),
            _ => None,
        }
    }
}

/// The issued challenge a nonce names (if any) and the replay state (spent, stored counter).
type ChallengeLookup = (Option<IssuedChallenge>, (bool, Option<u32>));

/// A verdict the core verifier accepted: its approver, and whether it is a signed refusal.
struct Accepted {
    approver: countersign::Approver,
    refused: bool,
}

/// The assertion's credential: enrolled, and the session's own.
fn own_credential<'r>(
    registry: &'r CredentialRegistry,
    credential_id: &[u8],
    session: &Session,
) -> Result<&'r countersign::EnrolledCredential, ApiError> {
    let credential = registry.get(credential_id).ok_or_else(|| {
        ApiError::unprocessable(ReasonCode::CredentialUnknown, "credential is not enrolled")
    })?;
    if credential.principal() != session.principal {
        return Err(ApiError::forbidden(
            ErrorCode::NotYourCredential,
            "the credential belongs to another principal than the session",
        ));
    }
    Ok(credential)
}

/// The challenge the nonce names must have been issued by this service, for this approval, to
/// this approver, and still be fresh. The core verifier re-checks the binding cryptographically.
fn check_issued(
    issued: Option<IssuedChallenge>,
    record: &ApprovalRecord,
    session: &Session,
    now: i64,
) -> Result<IssuedChallenge, ApiError> {
    let issued = issued.ok_or_else(|| {
        ApiError::unprocessable(
            ReasonCode::BindingMismatch,
            "the signed challenge was not issued by this service (or is used up)",
        )
    })?;
    if issued.approval_id != record.id {
        return Err(ApiError::unprocessable(
            ReasonCode::BindingMismatch,
            format!(
                "the signed challenge was issued for {}, not {}",
                issued.approval_id, record.id
            ),
        ));
    }
    if issued.principal != session.principal {
        return Err(ApiError::forbidden(
            ErrorCode::NotYourChallenge,
            "the challenge was issued to another approver",
        ));
    }
    if issued.expires_at <= now {
        return Err(ApiError::unprocessable(
            ReasonCode::Stale,
            "the challenge expired",
        ));
    }
    Ok(issued)
}

/// The op_hash a verdict of `decision` on this approval signs.
fn op_hash_of(record: &ApprovalRecord, decision: Decision) -> &[u8; 32] {
    match decision {
        Decision::Approved => &record.op_hash_approved,
        Decision::Denied => &record.op_hash_denied,
    }
}

/// The authority a human verdict grants: one call with the approval's op_hash, until the grant
/// window closes (nothing for a refusal).
fn decision_authority(
    record: &ApprovalRecord,
    status: ApprovalStatus,
    now: i64,
    grant_ttl: i64,
) -> serde_json::Value {
    let until = rfc3339(from_ms(now.saturating_add(grant_ttl)));
    let approved = status == ApprovalStatus::Approved;
    crate::audit::authority(
        approved.then_some(&record.op_hash_approved),
        approved.then_some(until.as_str()),
        "decision",
        None,
    )
}
