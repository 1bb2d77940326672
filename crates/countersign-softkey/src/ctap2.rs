//! The key as a CTAP2 authenticator: a command's bytes in (as `CTAPHID_CBOR` carries them: the
//! command byte, then its CBOR parameters), the status and the CBOR reply out.
//!
//! This lets a real CTAP2 client library talk to the deterministic key below its transport
//! layer, the way it talks to a USB security key once the HID framing is stripped. It answers
//! `authenticatorGetInfo` (0x04) and `authenticatorGetAssertion` (0x02), which is what signing in
//! and signing a decision take; every other command is `CTAP1_ERR_INVALID_COMMAND`. There is no
//! ClientPIN: the key either has built-in user verification (as a fingerprint key has) or none
//! at all, and says so in getInfo, so a client's UV planning takes the path it takes with a real
//! key of that kind.
//!
//! Its credential is discoverable for the one RP ID it was made for: an empty allow list finds
//! it there, a wrong RP ID or an allow list without its id finds nothing
//! (`CTAP2_ERR_NO_CREDENTIALS`), as on a real key. The counter starts at 0 and counts up by one
//! per assertion.

use crate::authdata::{Flags, build_authenticator_data};
use crate::cbor::Value as Out;
use crate::keys::SoftKey;
use serde_cbor_2::Value;
use std::collections::BTreeMap;

/// `authenticatorGetAssertion`.
pub const CMD_GET_ASSERTION: u8 = 0x02;
/// `authenticatorGetInfo`.
pub const CMD_GET_INFO: u8 = 0x04;

/// A CTAP status code other than success (CTAP 2.1 §8.2 "Status codes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Status(pub u8);

impl Status {
    /// `CTAP1_ERR_INVALID_COMMAND`: a command this key does not implement.
    pub const INVALID_COMMAND: Self = Self(0x01);
    /// `CTAP2_ERR_CBOR_UNEXPECTED_TYPE`: a parameter of the wrong CBOR type.
    pub const CBOR_UNEXPECTED_TYPE: Self = Self(0x11);
    /// `CTAP2_ERR_INVALID_CBOR`: the parameters do not decode.
    pub const INVALID_CBOR: Self = Self(0x12);
    /// `CTAP2_ERR_MISSING_PARAMETER`: rpId or clientDataHash absent.
    pub const MISSING_PARAMETER: Self = Self(0x14);
    /// `CTAP2_ERR_UNSUPPORTED_OPTION`: `uv` asked of a key without user verification.
    pub const UNSUPPORTED_OPTION: Self = Self(0x2B);
    /// `CTAP2_ERR_NO_CREDENTIALS`: no credential of this key for that RP ID and allow list.
    pub const NO_CREDENTIALS: Self = Self(0x2E);
    /// `CTAP2_ERR_PIN_AUTH_INVALID`: a pinUvAuthParam, which this key (without ClientPIN) can
    /// never have issued a token for.
    pub const PIN_AUTH_INVALID: Self = Self(0x33);
    /// `CTAP1_ERR_OTHER`: signing failed.
    pub const OTHER: Self = Self(0x7F);
}

/// A [`SoftKey`] behind the CTAP2 command interface.
#[derive(Debug)]
pub struct Ctap2Key {
    key: SoftKey,
    rp_id: String,
    user_verification: bool,
    sign_count: u32,
    touches: u32,
}

impl Ctap2Key {
    /// The key with its credential made for `rp_id`, and built-in user verification.
    pub fn new(key: SoftKey, rp_id: impl Into<String>) -> Self {
        Self {
            key,
            rp_id: rp_id.into(),
            user_verification: true,
            sign_count: 0,
            touches: 0,
        }
    }

    /// The same key without any user verification (no PIN, no biometric): getInfo leaves `uv`
    /// and `clientPin` out, and an assertion asking for `uv` is refused.
    pub fn without_user_verification(mut self) -> Self {
        self.user_verification = false;
        self
    }

    /// The key with its counter at `sign_count` (the next assertion counts one more).
    pub fn with_sign_count(mut self, sign_count: u32) -> Self {
        self.sign_count = sign_count;
        self
    }

    /// The counter of its last assertion.
    pub fn sign_count(&self) -> u32 {
        self.sign_count
    }

    /// The software key inside.
    pub fn key(&self) -> &SoftKey {
        &self.key
    }

    /// How many assertions it has made (each one a "touch").
    pub fn touches(&self) -> u32 {
        self.touches
    }

    /// Handle one command: `Ok(CBOR reply)` (status 0x00), or the error status.
    pub fn transmit(&mut self, request: &[u8]) -> Result<Vec<u8>, Status> {
        let (&command, parameters) = request.split_first().ok_or(Status::INVALID_COMMAND)?;
        match command {
            CMD_GET_INFO => Ok(self.info().encode()),
            CMD_GET_ASSERTION => {
                let parameters: Value =
                    serde_cbor_2::from_slice(parameters).map_err(|_| Status::INVALID_CBOR)?;
                self.get_assertion(&parameters).map(|reply| reply.encode())
            }
            _ => Err(Status::INVALID_COMMAND),
        }
    }

    /// [`Ctap2Key::transmit`] with the status byte first, as a `CTAPHID_CBOR` reply carries it.
    pub fn transmit_framed(&mut self, request: &[u8]) -> Vec<u8> {
        match self.transmit(request) {
            Ok(mut reply) => {
                reply.insert(0, 0x00);
                reply
            }
            Err(Status(code)) => vec![code],
        }
    }

    fn info(&self) -> Out {
        let mut options = vec![
            (Out::text("rk"), Out::Bool(true)),
            (Out::text("up"), Out::Bool(true)),
        ];
        if self.user_verification {
            options.push((Out::text("uv"), Out::Bool(true)));
        }
        Out::Map(vec![
            (Out::Int(1), Out::Array(vec![Out::text("FIDO_2_0")])),
            (Out::Int(3), Out::bytes(self.key.aaguid().to_vec())),
            (Out::Int(4), Out::Map(options)),
            (Out::Int(5), Out::Int(1200)),
        ])
    }

    fn get_assertion(&mut self, parameters: &Value) -> Result<Out, Status> {
        let Value::Map(map) = parameters else {
            return Err(Status::CBOR_UNEXPECTED_TYPE);
        };
        let member = |n: i128| map.get(&Value::Integer(n));
        let rp_id = match member(1) {
            Some(Value::Text(t)) => t.as_str(),
            Some(_) => return Err(Status::CBOR_UNEXPECTED_TYPE),
            None => return Err(Status::MISSING_PARAMETER),
        };
        let client_data_hash = match member(2) {
            Some(Value::Bytes(b)) => b.as_slice(),
            Some(_) => return Err(Status::CBOR_UNEXPECTED_TYPE),
            None => return Err(Status::MISSING_PARAMETER),
        };
        if member(6).is_some() {
            return Err(Status::PIN_AUTH_INVALID);
        }
        let uv = option(member(5), "uv")?;
        if uv && !self.user_verification {
            return Err(Status::UNSUPPORTED_OPTION);
        }
        if rp_id != self.rp_id || !self.allowed(member(3))? {
            return Err(Status::NO_CREDENTIALS);
        }
        self.sign_count = self.sign_count.saturating_add(1);
        self.touches = self.touches.saturating_add(1);
        let flags = Flags {
            up: true,
            uv,
            ..Flags::NONE
        };
        let authenticator_data =
            build_authenticator_data(&self.rp_id, flags, self.sign_count, None, None);
        let mut message = authenticator_data.clone();
        message.extend_from_slice(client_data_hash);
        let signature = self.key.sign(&message).map_err(|_| Status::OTHER)?;
        Ok(Out::Map(vec![
            (
                Out::Int(1),
                Out::Map(vec![
                    (
                        Out::text("id"),
                        Out::bytes(self.key.credential_id().to_vec()),
                    ),
                    (Out::text("type"), Out::text("public-key")),
                ]),
            ),
            (Out::Int(2), Out::Bytes(authenticator_data)),
            (Out::Int(3), Out::Bytes(signature)),
        ]))
    }

    /// Whether the allow list (absent or empty: any discoverable credential) names this key's.
    fn allowed(&self, allow_list: Option<&Value>) -> Result<bool, Status> {
        let entries = match allow_list {
            None => return Ok(true),
            Some(Value::Array(entries)) if entries.is_empty() => return Ok(true),
            Some(Value::Array(entries)) => entries,
            Some(_) => return Err(Status::CBOR_UNEXPECTED_TYPE),
        };
        let id = Value::Text("id".to_owned());
        Ok(entries.iter().any(|entry| match entry {
            Value::Map(descriptor) => matches!(
                descriptor.get(&id),
                Some(Value::Bytes(b)) if b.as_slice() == self.key.credential_id()
            ),
            _ => false,
        }))
    }
}

/// A boolean member of the options map (absent: false).
fn option(options: Option<&Value>, name: &str) -> Result<bool, Status> {
    let options: &BTreeMap<Value, Value> = match options {
        None => return Ok(false),
        Some(Value::Map(m)) => m,
        Some(_) => return Err(Status::CBOR_UNEXPECTED_TYPE),
    };
    match options.get(&Value::Text(name.to_owned())) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(Status::CBOR_UNEXPECTED_TYPE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest as _, Sha256};

    fn key() -> Ctap2Key {
        Ctap2Key::new(SoftKey::fixture("alice-es256").unwrap(), "example.com")
    }

    fn request(rp_id: &str, allow: Option<Vec<u8>>, uv: bool) -> Vec<u8> {
        let mut members = vec![
            (Out::Int(1), Out::text(rp_id)),
            (Out::Int(2), Out::bytes([7u8; 32].to_vec())),
            (
                Out::Int(5),
                Out::Map(vec![(Out::text("uv"), Out::Bool(uv))]),
            ),
        ];
        if let Some(id) = allow {
            members.push((
                Out::Int(3),
                Out::Array(vec![Out::Map(vec![
                    (Out::text("id"), Out::Bytes(id)),
                    (Out::text("type"), Out::text("public-key")),
                ])]),
            ));
        }
        let mut bytes = vec![CMD_GET_ASSERTION];
        bytes.extend(Out::Map(members).encode());
        bytes
    }

    fn reply(bytes: &[u8]) -> BTreeMap<Value, Value> {
        match serde_cbor_2::from_slice(bytes).unwrap() {
            Value::Map(m) => m,
            other => panic!("not a map: {other:?}"),
        }
    }

    #[test]
    fn get_info_says_what_the_key_can_do() {
        let info = reply(&key().transmit(&[CMD_GET_INFO]).unwrap());
        let options = &info[&Value::Integer(4)];
        let Value::Map(options) = options else {
            panic!("options")
        };
        assert_eq!(options[&Value::Text("uv".into())], Value::Bool(true));
        let info = reply(
            &key()
                .without_user_verification()
                .transmit(&[CMD_GET_INFO])
                .unwrap(),
        );
        let Value::Map(options) = &info[&Value::Integer(4)] else {
            panic!("options")
        };
        assert!(!options.contains_key(&Value::Text("uv".into())));
    }

    #[test]
    fn an_assertion_verifies_and_counts() {
        let mut k = key();
        for count in 1..=2u32 {
            let r = reply(&k.transmit(&request("example.com", None, true)).unwrap());
            let Value::Bytes(auth_data) = &r[&Value::Integer(2)] else {
                panic!("authData")
            };
            assert_eq!(auth_data[..32], Sha256::digest(b"example.com")[..]);
            assert_eq!(auth_data[32], 0x05, "UP and UV");
            assert_eq!(auth_data[33..37], count.to_be_bytes());
            let Value::Bytes(signature) = &r[&Value::Integer(3)] else {
                panic!("signature")
            };
            let mut message = auth_data.clone();
            message.extend([7u8; 32]);
            let expected = k.key().sign(&message).unwrap();
            assert_eq!(
                signature, &expected,
                "deterministic ES256 over authData || hash"
            );
        }
        assert_eq!(k.touches(), 2);
    }

    #[test]
    fn wrong_rp_unknown_credential_and_missing_uv_are_refused() {
        let mut k = key();
        let id = k.key().credential_id().to_vec();
        assert_eq!(
            k.transmit(&request("other.example", None, true)),
            Err(Status::NO_CREDENTIALS)
        );
        assert_eq!(
            k.transmit(&request("example.com", Some(vec![1, 2, 3]), true)),
            Err(Status::NO_CREDENTIALS)
        );
        assert!(k.transmit(&request("example.com", Some(id), true)).is_ok());
        let mut plain = key().without_user_verification();
        assert_eq!(
            plain.transmit(&request("example.com", None, true)),
            Err(Status::UNSUPPORTED_OPTION)
        );
        assert_eq!(k.transmit(&[0x06]), Err(Status::INVALID_COMMAND));
        assert_eq!(k.transmit_framed(&[0x02, 0xff]), vec![0x12]);
    }
}
