//! The `requestState` of a 2026-07-28 multi round-trip answer: ids and hashes only (never the
//! arguments), an expiry, and an HMAC-SHA-256 under a key that never leaves the interposer.
//!
//! Wire form: `base64url(payload JSON) "." base64url(HMAC(key, "countersign.mcp-request-state/1\n"
//! || payload))`. The client echoes it opaquely; the interposer believes nothing in it that it
//! cannot check: the op_hash must equal the one recomputed from the retried request, so a state
//! moved onto other arguments (or another tool, server or agent) is refused.

use countersign::b64;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// Domain separation: this key MACs nothing else.
const DOMAIN: &[u8] = b"countersign.mcp-request-state/1\n";

/// What a state says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestState {
    pub approval_id: String,
    /// base64url of the APPROVED op_hash of the held call.
    pub op_hash: String,
    /// Unix seconds after which the state is refused.
    pub exp: i64,
}

/// Why a presented state is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState is not <payload>.<mac> in base64url")]
    Malformed,
    #[error("requestState does not verify (tampered, or from another interposer or run)")]
    BadMac,
    #[error("requestState expired at {0}")]
    Expired(i64),
    #[error("requestState is for another call (op_hash {stated}, this call {actual})")]
    OtherCall { stated: String, actual: String },
}

impl StateError {
    /// The reason code a client sees.
    pub fn reason_code(&self) -> &'static str {
        match self {
            Self::Expired(_) => "request_state_expired",
            Self::OtherCall { .. } => "binding_mismatch",
            Self::Malformed | Self::BadMac => "request_state_invalid",
        }
    }
}

/// Seals and opens states.
pub struct StateCodec {
    key: hmac::Key,
}

impl std::fmt::Debug for StateCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateCodec(***)")
    }
}

impl StateCodec {
    /// A codec with a fresh random key (states do not survive a restart: the client then gets a
    /// refusal naming `request_state_invalid` and its next plain call finds the ticket again).
    pub fn random() -> Result<Self, ring::error::Unspecified> {
        let rng = ring::rand::SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng)?;
        Ok(Self { key })
    }

    /// A codec with a given key (tests).
    pub fn with_key(key: &[u8]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
        }
    }

    fn mac(&self, payload: &[u8]) -> hmac::Tag {
        let mut ctx = hmac::Context::with_key(&self.key);
        ctx.update(DOMAIN);
        ctx.update(payload);
        ctx.sign()
    }

    /// The wire text of `state`.
    pub fn seal(&self, state: &RequestState) -> String {
        let payload = serde_json::to_vec(state).unwrap_or_default();
        let tag = self.mac(&payload);
        format!("{}.{}", b64::encode(&payload), b64::encode(tag.as_ref()))
    }

    /// Open `text` for the call whose recomputed op_hash is `op_hash`, at Unix time `now`.
    pub fn open(&self, text: &str, op_hash: &str, now: i64) -> Result<RequestState, StateError> {
        let (payload, mac) = text.split_once('.').ok_or(StateError::Malformed)?;
        let payload = b64::decode(payload).map_err(|_| StateError::Malformed)?;
        let mac = b64::decode(mac).map_err(|_| StateError::Malformed)?;
        let mut ctx = Vec::with_capacity(DOMAIN.len() + payload.len());
        ctx.extend_from_slice(DOMAIN);
        ctx.extend_from_slice(&payload);
        // Constant-time comparison inside ring.
        hmac::verify(&self.key, &ctx, &mac).map_err(|_| StateError::BadMac)?;
        let state: RequestState =
            serde_json::from_slice(&payload).map_err(|_| StateError::Malformed)?;
        if now >= state.exp {
            return Err(StateError::Expired(state.exp));
        }
        if state.op_hash != op_hash {
            return Err(StateError::OtherCall {
                stated: state.op_hash,
                actual: op_hash.to_owned(),
            });
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> RequestState {
        RequestState {
            approval_id: "apr_1".into(),
            op_hash: "H1".into(),
            exp: 1_000,
        }
    }

    #[test]
    fn a_sealed_state_opens_for_its_own_call_before_expiry() {
        let c = StateCodec::with_key(b"k");
        let text = c.seal(&state());
        assert_eq!(c.open(&text, "H1", 999), Ok(state()));
        assert!(!text.contains("path"), "ids and hashes only");
    }

    #[test]
    fn tampered_foreign_expired_and_moved_states_are_refused() {
        let c = StateCodec::with_key(b"k");
        let text = c.seal(&state());
        // One flipped character of the payload.
        let (payload, mac) = text.split_once('.').unwrap();
        let mut bytes = b64::decode(payload).unwrap();
        bytes[3] ^= 1;
        let tampered = format!("{}.{mac}", b64::encode(&bytes));
        assert_eq!(c.open(&tampered, "H1", 0), Err(StateError::BadMac));
        // Another interposer's key.
        let other = StateCodec::with_key(b"other");
        assert_eq!(other.open(&text, "H1", 0), Err(StateError::BadMac));
        assert_eq!(c.open(&text, "H1", 1_000), Err(StateError::Expired(1_000)));
        assert_eq!(
            c.open(&text, "H2", 0).map_err(|e| e.reason_code()),
            Err("binding_mismatch")
        );
        assert_eq!(c.open("nodot", "H1", 0), Err(StateError::Malformed));
        assert_eq!(c.open("!!.!!", "H1", 0), Err(StateError::Malformed));
    }
}
