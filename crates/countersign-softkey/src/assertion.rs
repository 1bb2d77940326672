//! `navigator.credentials.get()` as a function: request in, signed assertion bytes out.

use crate::authdata::{self, Part};
use crate::ceremony::Ceremony;
use crate::error::Error;
use crate::keys::{self, SoftKey};

/// Everything an assertion depends on: a [`Ceremony`] and the user handle. Build from a ceremony,
/// as is (`AssertionRequest::from(Ceremony::get(rp_id, origin, challenge))`) or with fields
/// overridden by struct-update syntax (`AssertionRequest::from(Ceremony { sign_count: 0,
/// ..Ceremony::get(..) })`).
#[derive(Clone, Debug, PartialEq)]
pub struct AssertionRequest {
    /// What is signed and how.
    pub ceremony: Ceremony,
    /// `userHandle` echoed in the response (discoverable credentials).
    pub user_handle: Option<Vec<u8>>,
}

impl From<Ceremony> for AssertionRequest {
    /// An assertion of `ceremony`, with no user handle.
    fn from(ceremony: Ceremony) -> Self {
        Self {
            ceremony,
            user_handle: None,
        }
    }
}

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
        crate::credential_json(&self.credential_id, response)
    }
}

impl SoftKey {
    /// Produces an assertion. With `flags.at` set, the attested credential data is included too
    /// (as some platform authenticators do on assertions).
    pub fn assert(&self, req: &AssertionRequest) -> Result<AssertionResponse, Error> {
        let c = &req.ceremony;
        let attested = c.flags.at.then(|| self.attested_credential_data());
        let authenticator_data = c.authenticator_data(attested.as_deref());
        let client_data_json = c.client_data_json();
        let signature = self.sign_client_data(&authenticator_data, &client_data_json)?;
        let signature = c.signature_quirk.apply(self.alg(), &signature)?;
        Ok(AssertionResponse {
            credential_id: self.credential_id().to_vec(),
            client_data_json,
            authenticator_data,
            signature,
            user_handle: req.user_handle.clone(),
        })
    }
}
