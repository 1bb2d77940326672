//! `navigator.credentials.get()` as a function: request in, signed assertion bytes out.

use crate::authdata::{self, Flags, Part, SignatureQuirk};
use crate::client_data;
use crate::error::Error;
use crate::keys::{self, SoftKey};

/// Everything an assertion depends on. Build with [`AssertionRequest::new`] and override fields
/// with struct-update syntax: `AssertionRequest { sign_count: 0, ..AssertionRequest::new(..) }`.
#[derive(Clone, Debug, PartialEq)]
pub struct AssertionRequest {
    /// RP ID hashed into authenticator data.
    pub rp_id: String,
    /// `origin` in clientDataJSON.
    pub origin: String,
    /// Challenge bytes; clientDataJSON carries them base64url without padding.
    pub challenge: Vec<u8>,
    /// Flags byte, written verbatim. Default [`Flags::UP_UV`].
    pub flags: Flags,
    /// Signature counter. Default 1 (0 is the "no counter" value synced passkeys send).
    pub sign_count: u32,
    /// `type` in clientDataJSON. Default `webauthn.get`.
    pub client_data_type: String,
    /// `crossOrigin`; `None` omits the key. Default `Some(false)`, as Chrome writes it.
    pub cross_origin: Option<bool>,
    /// `topOrigin`, written after `crossOrigin` when given.
    pub top_origin: Option<String>,
    /// Keys appended to clientDataJSON after the standard ones, in order.
    pub extra_client_data: Vec<(String, serde_json::Value)>,
    /// Use these exact clientDataJSON bytes instead of building them (the fields above that only
    /// feed clientDataJSON are then ignored).
    pub client_data_override: Option<Vec<u8>>,
    /// Extension outputs (a CBOR map, see [`crate::cbor::Value`]) appended to authenticator
    /// data. The ED flag is not set for you.
    pub extensions: Option<Vec<u8>>,
    /// `userHandle` echoed in the response (discoverable credentials).
    pub user_handle: Option<Vec<u8>>,
    /// How to encode an ECDSA signature. Default canonical DER.
    pub signature_quirk: SignatureQuirk,
}

impl AssertionRequest {
    /// A well-formed request: UP+UV, counter 1, `crossOrigin: false`, nothing extra.
    pub fn new(
        rp_id: impl Into<String>,
        origin: impl Into<String>,
        challenge: impl Into<Vec<u8>>,
    ) -> Self {
        Self {
            rp_id: rp_id.into(),
            origin: origin.into(),
            challenge: challenge.into(),
            flags: Flags::UP_UV,
            sign_count: 1,
            client_data_type: "webauthn.get".to_owned(),
            cross_origin: Some(false),
            top_origin: None,
            extra_client_data: Vec::new(),
            client_data_override: None,
            extensions: None,
            user_handle: None,
            signature_quirk: SignatureQuirk::None,
        }
    }
}

client_data::request_client_data_json!(AssertionRequest);

/// The raw bytes of an assertion, as `AuthenticatorAssertionResponse` exposes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssertionResponse {
    /// The credential id (`rawId`).
    pub credential_id: Vec<u8>,
    /// clientDataJSON.
    pub client_data_json: Vec<u8>,
    /// Authenticator data.
    pub authenticator_data: Vec<u8>,
    /// The signature over `authenticator_data || SHA-256(client_data_json)`.
    pub signature: Vec<u8>,
    /// userHandle, when the request asked for one.
    pub user_handle: Option<Vec<u8>>,
}

impl AssertionResponse {
    /// `authenticator_data || SHA-256(client_data_json)`: the bytes the signature covers (after
    /// any tampering, the bytes it would have to cover).
    pub fn signed_message(&self) -> Vec<u8> {
        keys::signed_message(&self.authenticator_data, &self.client_data_json)
    }

    /// Tamper hook: flips one bit of a field after signing. Bit 0 is the top bit of byte 0.
    pub fn flip_bit(&mut self, part: Part, bit: usize) -> Result<(), Error> {
        let bytes = match part {
            Part::Signature => &mut self.signature,
            Part::AuthenticatorData => &mut self.authenticator_data,
            Part::ClientDataJson => &mut self.client_data_json,
        };
        authdata::flip_bit(part, bytes, bit)
    }

    /// `AuthenticationResponseJSON` (WebAuthn L3 §5.1), every binary field base64url.
    pub fn to_json(&self) -> serde_json::Value {
        let mut response = serde_json::json!({
            "clientDataJSON": crate::b64url(&self.client_data_json),
            "authenticatorData": crate::b64url(&self.authenticator_data),
            "signature": crate::b64url(&self.signature),
        });
        if let (Some(handle), Some(obj)) = (&self.user_handle, response.as_object_mut()) {
            obj.insert("userHandle".into(), crate::b64url(handle).into());
        }
        serde_json::json!({
            "id": crate::b64url(&self.credential_id),
            "rawId": crate::b64url(&self.credential_id),
            "type": "public-key",
            "authenticatorAttachment": "cross-platform",
            "clientExtensionResults": {},
            "response": response,
        })
    }
}

impl SoftKey {
    /// Produces an assertion. With `flags.at` set, the attested credential data is included too
    /// (as some platform authenticators do on assertions).
    pub fn assert(&self, req: &AssertionRequest) -> Result<AssertionResponse, Error> {
        let attested = req.flags.at.then(|| self.attested_credential_data());
        let authenticator_data = authdata::build_authenticator_data(
            &req.rp_id,
            req.flags,
            req.sign_count,
            attested.as_deref(),
            req.extensions.as_deref(),
        );
        let client_data_json = req.client_data_json();
        let signature = self.sign_client_data(&authenticator_data, &client_data_json)?;
        let signature = req.signature_quirk.apply(self.alg(), &signature)?;
        Ok(AssertionResponse {
            credential_id: self.credential_id().to_vec(),
            client_data_json,
            authenticator_data,
            signature,
            user_handle: req.user_handle.clone(),
        })
    }
}
