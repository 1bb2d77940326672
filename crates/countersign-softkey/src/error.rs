//! The crate's one error type. Every variant is API misuse or broken fixture data: nothing here
//! judges hostile input, so there is no reason-code mapping.

use crate::keys::Alg;

/// Why the soft authenticator could not produce what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No fixture key by that name in `fixtures/keys/seeds.json`.
    #[error("no fixture key named {name:?}")]
    UnknownFixture {
        /// The name asked for.
        name: String,
    },
    /// The fixture index or a key file could not be read or parsed.
    #[error("bad key material: {reason}")]
    BadKeyMaterial {
        /// What went wrong.
        reason: String,
    },
    /// The algorithm has no portable seed derivation (RSA key generation depends on the crate
    /// version), so the key must come from a PKCS#8 file.
    #[error("{} keys cannot be derived from a seed", alg.name())]
    NoSeedDerivation {
        /// The algorithm asked for.
        alg: Alg,
    },
    /// Credential ids are 1..=1023 bytes (WebAuthn L3 §5.8.3).
    #[error("credential id length {len} outside 1..=1023")]
    CredentialIdLength {
        /// The length asked for.
        len: usize,
    },
    /// A signature quirk that this key or this particular signature cannot express.
    #[error("signature quirk {quirk} not applicable: {reason}")]
    QuirkNotApplicable {
        /// The quirk's name.
        quirk: &'static str,
        /// Why it cannot be applied.
        reason: &'static str,
    },
    /// A tamper hook pointed past the end of the field.
    #[error("bit {bit} is outside {part} ({len} bytes)")]
    BitOutOfRange {
        /// The field.
        part: &'static str,
        /// The bit index asked for.
        bit: usize,
        /// The field's length in bytes.
        len: usize,
    },
    /// The signing primitive failed (not expected with valid keys).
    #[error("signing failed: {reason}")]
    Signing {
        /// The primitive's message.
        reason: String,
    },
}
