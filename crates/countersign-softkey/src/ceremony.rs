//! What both ceremonies sign and how: the relying party, the clientDataJSON, the authenticator
//! data's flags, counter and extensions, and the signature's encoding. [`crate::AssertionRequest`]
//! and [`crate::RegistrationRequest`] each embed one and add only their own members.

use crate::authdata::{self, Flags, SignatureQuirk};
use crate::client_data;

/// The members both ceremonies share. Start from [`Ceremony::get`] or [`Ceremony::create`] and
/// override fields with struct-update syntax:
/// `AssertionRequest::from(Ceremony { sign_count: 0, ..Ceremony::get(rp_id, origin, challenge) })`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ceremony {
    /// RP ID hashed into authenticator data.
    pub rp_id: String,
    /// `origin` in clientDataJSON.
    pub origin: String,
    /// Challenge bytes; clientDataJSON carries them base64url without padding.
    pub challenge: Vec<u8>,
    /// Flags byte, written verbatim. A registration includes attested credential data whatever
    /// AT says.
    pub flags: Flags,
    /// Signature counter (0 is the "no counter" value synced passkeys send).
    pub sign_count: u32,
    /// `type` in clientDataJSON.
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
    /// How to encode an ECDSA signature (an assertion's, or a registration's attestation
    /// signature). Default canonical DER.
    pub signature_quirk: SignatureQuirk,
}

impl Ceremony {
    /// A well-formed `navigator.credentials.get()`: UP+UV, counter 1, `webauthn.get`,
    /// `crossOrigin: false`, nothing extra.
    pub fn get(
        rp_id: impl Into<String>,
        origin: impl Into<String>,
        challenge: impl Into<Vec<u8>>,
    ) -> Self {
        Self::with(rp_id.into(), origin.into(), challenge.into(), Kind::Get)
    }

    /// A well-formed `navigator.credentials.create()`: UP+UV+AT, counter 0, `webauthn.create`,
    /// `crossOrigin: false`, nothing extra.
    pub fn create(
        rp_id: impl Into<String>,
        origin: impl Into<String>,
        challenge: impl Into<Vec<u8>>,
    ) -> Self {
        Self::with(rp_id.into(), origin.into(), challenge.into(), Kind::Create)
    }

    /// The two ceremonies differ only in these defaults.
    fn with(rp_id: String, origin: String, challenge: Vec<u8>, kind: Kind) -> Self {
        let (flags, sign_count, client_data_type) = match kind {
            Kind::Get => (Flags::UP_UV, 1, "webauthn.get"),
            Kind::Create => (Flags::UP_UV_AT, 0, "webauthn.create"),
        };
        Self {
            rp_id,
            origin,
            challenge,
            flags,
            sign_count,
            client_data_type: client_data_type.to_owned(),
            cross_origin: Some(false),
            top_origin: None,
            extra_client_data: Vec::new(),
            client_data_override: None,
            extensions: None,
            signature_quirk: SignatureQuirk::None,
        }
    }

    /// The authenticator data this ceremony produces: RP ID hash, flags, counter, then
    /// `attested` (the attested credential data, when the ceremony carries one) and the
    /// extensions.
    pub fn authenticator_data(&self, attested: Option<&[u8]>) -> Vec<u8> {
        authdata::build_authenticator_data(
            &self.rp_id,
            self.flags,
            self.sign_count,
            attested,
            self.extensions.as_deref(),
        )
    }

    /// The clientDataJSON this ceremony produces: `client_data_override` verbatim when given,
    /// else built from the fields above in the order browsers write them.
    pub fn client_data_json(&self) -> Vec<u8> {
        match &self.client_data_override {
            Some(bytes) => bytes.clone(),
            None => client_data::build(&client_data::Spec {
                typ: &self.client_data_type,
                challenge: &self.challenge,
                origin: &self.origin,
                cross_origin: self.cross_origin,
                top_origin: self.top_origin.as_deref(),
                extra: &self.extra_client_data,
            }),
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Get,
    Create,
}
