//! Verifying an authentication assertion (WebAuthn Level 3 §7.2), steps in specification order.
//!
//! Steps 1–9 of §7.2 (finding the credential, checking the user handle) belong to the caller, who
//! looks the credential up in its registry and hands us the enrolled key; we start at step 10.

use super::auth_data::{self, AuthDataError, AuthenticatorData, Flags};
use super::backend::{PreparedSignature, SignatureBackend, SignatureError};
use super::client_data::{ClientData, ClientDataError};
use super::cose::{CoseError, CosePublicKey};
use super::der::DerPolicy;
use crate::reason::ReasonCode;
use sha2::{Digest, Sha256};

/// What the relying party expects of an assertion.
#[derive(Debug, Clone)]
pub struct AssertionExpectations<'a> {
    /// The challenge issued (for Countersign: `nonce || op_hash`).
    pub challenge: &'a [u8],
    /// The RP ID the credential must be scoped to.
    pub rp_id: &'a str,
    /// Origins the client may report (compared as origins; see [`ClientData::check_origin`]).
    pub origins: &'a [String],
    /// Accept `crossOrigin: true` (an embedded iframe). Off by default: an approval page has no
    /// reason to be framed by another site.
    pub allow_cross_origin: bool,
    /// Top-level origins accepted when `topOrigin` is present.
    pub allowed_top_origins: &'a [String],
    /// Require the UV flag.
    pub require_user_verification: bool,
    /// The counter stored for this credential.
    pub stored_sign_count: u32,
    /// BE as recorded at enrollment, if recorded.
    pub backup_eligible: Option<bool>,
    /// How ECDSA DER is read; [`DerPolicy::Strict`] unless a known device needs otherwise.
    pub der_policy: DerPolicy,
}

impl<'a> AssertionExpectations<'a> {
    /// The strict defaults: same-origin only, user verification required, counter 0, BE unknown,
    /// strict DER.
    pub fn new(challenge: &'a [u8], rp_id: &'a str, origins: &'a [String]) -> Self {
        Self {
            challenge,
            rp_id,
            origins,
            allow_cross_origin: false,
            allowed_top_origins: &[],
            require_user_verification: true,
            stored_sign_count: 0,
            backup_eligible: None,
            der_policy: DerPolicy::Strict,
        }
    }
}

/// The three byte strings an authenticator returns.
#[derive(Debug, Clone, Copy)]
pub struct Assertion<'a> {
    /// `response.clientDataJSON`.
    pub client_data_json: &'a [u8],
    /// `response.authenticatorData`.
    pub authenticator_data: &'a [u8],
    /// `response.signature`.
    pub signature: &'a [u8],
}

/// Proof that every check passed (constructible only inside the crate: `non_exhaustive`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct VerifiedAssertion {
    /// The parsed client data.
    pub client_data: ClientData,
    /// The authenticator data flags.
    pub flags: Flags,
    /// The new counter value, to store.
    pub sign_count: u32,
}

/// Why an assertion was refused: one variant per concern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssertionError {
    /// clientDataJSON.
    #[error(transparent)]
    ClientData(#[from] ClientDataError),
    /// authenticatorData.
    #[error(transparent)]
    AuthData(#[from] AuthDataError),
    /// The signature.
    #[error(transparent)]
    Signature(#[from] SignatureError),
    /// The credential public key (for callers that parse the key and verify in one step).
    #[error(transparent)]
    Cose(#[from] CoseError),
}

impl AssertionError {
    /// The wire reason code.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::ClientData(e) => e.reason_code(),
            Self::AuthData(e) => e.reason_code(),
            Self::Signature(e) => e.reason_code(),
            Self::Cose(e) => e.reason_code(),
        }
    }
}

/// Verify one assertion against the enrolled `key` and the relying party's `expect`ations.
///
/// Checks run in the order of §7.2, each returning early; the signature is verified before the
/// counter, so a counter regression is only ever reported for data the authenticator signed.
pub fn verify_assertion(
    key: &CosePublicKey,
    assertion: &Assertion<'_>,
    expect: &AssertionExpectations<'_>,
    backend: &dyn SignatureBackend,
) -> Result<VerifiedAssertion, AssertionError> {
    // Steps 10–14: the client data.
    let client_data = ClientData::parse_strict(assertion.client_data_json)?;
    client_data.check_type()?;
    client_data.check_challenge(expect.challenge)?;
    client_data.check_origin(expect.origins)?;
    client_data.check_cross_origin(expect.allow_cross_origin, expect.allowed_top_origins)?;

    // Steps 15–19: the authenticator data. Extensions (step 19) are parsed for framing only: no
    // extension output changes a Countersign verdict.
    let auth_data = AuthenticatorData::parse(assertion.authenticator_data)?;
    auth_data.check_rp_id(expect.rp_id)?;
    auth_data.check_user_present()?;
    auth_data.check_user_verified(expect.require_user_verification)?;
    auth_data.check_backup_flags(expect.backup_eligible)?;

    // Steps 20–21: the signature over authenticatorData || SHA-256(clientDataJSON).
    let signature = PreparedSignature::new(key, assertion.signature, expect.der_policy)?;
    let client_data_hash: [u8; 32] = Sha256::digest(assertion.client_data_json).into();
    with_signed_data(assertion.authenticator_data, &client_data_hash, |signed| {
        backend.verify(key, signed, &signature)
    })?;

    // Step 22: the counter.
    auth_data::check_sign_count(expect.stored_sign_count, auth_data.sign_count)?;

    Ok(VerifiedAssertion {
        client_data,
        flags: auth_data.flags,
        sign_count: auth_data.sign_count,
    })
}

/// Run `f` on `auth_data || client_data_hash`, on the stack when it fits (it nearly always does:
/// assertion authenticator data is 37 bytes unless AT or ED is set).
fn with_signed_data<R>(
    auth_data: &[u8],
    client_data_hash: &[u8; 32],
    f: impl FnOnce(&[u8]) -> R,
) -> R {
    const STACK: usize = 512;
    let total = auth_data.len() + client_data_hash.len();
    let mut stack = [0u8; STACK];
    if let Some(buf) = stack.get_mut(..total) {
        let (head, tail) = buf.split_at_mut(auth_data.len());
        head.copy_from_slice(auth_data);
        tail.copy_from_slice(client_data_hash);
        f(buf)
    } else {
        let mut heap = Vec::with_capacity(total);
        heap.extend_from_slice(auth_data);
        heap.extend_from_slice(client_data_hash);
        f(&heap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_data_is_the_concatenation_on_stack_and_heap() {
        let hash = [0xcc; 32];
        for len in [0, 37, 480, 481, 2000] {
            let auth_data = vec![0xaa; len];
            let got = with_signed_data(&auth_data, &hash, <[u8]>::to_vec);
            assert_eq!(got.len(), len + 32);
            assert_eq!(&got[..len], &auth_data[..]);
            assert_eq!(&got[len..], &hash);
        }
    }

    #[test]
    fn reason_codes_pass_through() {
        let e = AssertionError::from(AuthDataError::CounterRegression { stored: 2, got: 1 });
        assert_eq!(e.reason_code(), ReasonCode::CounterRegression);
        let e = AssertionError::from(ClientDataError::CrossOriginNotAllowed);
        assert_eq!(e.reason_code(), ReasonCode::OriginMismatch);
        let e = AssertionError::from(SignatureError::Invalid { backend: "x" });
        assert_eq!(e.reason_code(), ReasonCode::SignatureInvalid);
        let e = AssertionError::from(CoseError::UnsupportedAlgorithm {
            alg: -36,
            crv: None,
        });
        assert_eq!(e.reason_code(), ReasonCode::UnsupportedAlgorithm);
    }
}
