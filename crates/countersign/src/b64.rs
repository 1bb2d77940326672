//! base64url helpers and a serde adapter for byte strings on the wire.
//!
//! The wire format is base64url without padding (RFC 4648 §5). Decoding is strict: padding and the
//! standard alphabet are refused, so one byte string has exactly one spelling.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Encode bytes as unpadded base64url.
pub fn encode(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decode unpadded base64url, refusing padding, other alphabets and non-canonical trailing bits.
pub fn decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(text)
}

/// `#[serde(with = "crate::b64::bytes")]` for `Vec<u8>` fields carried as base64url strings.
pub(crate) mod bytes {
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::encode(bytes))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        super::decode(&text).map_err(|e| D::Error::custom(format!("invalid base64url: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_padding_and_standard_alphabet() {
        let bytes = [0xfb, 0xff, 0x00, 0x01];
        let text = encode(&bytes);
        assert_eq!(text, "-_8AAQ");
        assert_eq!(decode(&text).ok(), Some(bytes.to_vec()));
        assert!(decode("-_8AAQ==").is_err(), "padding must be refused");
        assert!(
            decode("+/8AAQ").is_err(),
            "standard alphabet must be refused"
        );
        assert!(
            decode("-_8AAR").is_err(),
            "non-zero trailing bits must be refused"
        );
    }
}
