//! Authenticator data (WebAuthn §6.1): what the authenticator itself asserts, under its signature.
//!
//! Layout: `rpIdHash (32) || flags (1) || signCount (4, big-endian)`, then attested credential data
//! if AT is set, then a CBOR extensions map if ED is set, and nothing else. Parsing borrows from the
//! input and never allocates.

use super::cbor::{self, CborError};
use crate::reason::ReasonCode;
use sha2::{Digest, Sha256};

/// Authenticator data flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flags(pub u8);

impl Flags {
    /// UP: the user touched the authenticator.
    pub const USER_PRESENT: u8 = 0x01;
    /// UV: the authenticator verified the user (PIN, biometric).
    pub const USER_VERIFIED: u8 = 0x04;
    /// BE: the credential may be backed up (synced passkey); fixed at creation.
    pub const BACKUP_ELIGIBLE: u8 = 0x08;
    /// BS: the credential is currently backed up.
    pub const BACKUP_STATE: u8 = 0x10;
    /// AT: attested credential data follows.
    pub const ATTESTED_DATA: u8 = 0x40;
    /// ED: an extensions map follows.
    pub const EXTENSION_DATA: u8 = 0x80;

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
    /// UP.
    pub fn user_present(self) -> bool {
        self.has(Self::USER_PRESENT)
    }
    /// UV.
    pub fn user_verified(self) -> bool {
        self.has(Self::USER_VERIFIED)
    }
    /// BE.
    pub fn backup_eligible(self) -> bool {
        self.has(Self::BACKUP_ELIGIBLE)
    }
    /// BS.
    pub fn backup_state(self) -> bool {
        self.has(Self::BACKUP_STATE)
    }
    /// AT.
    pub fn attested_credential_data(self) -> bool {
        self.has(Self::ATTESTED_DATA)
    }
    /// ED.
    pub fn extension_data(self) -> bool {
        self.has(Self::EXTENSION_DATA)
    }
}

/// Credential ids longer than this are refused (WebAuthn §5.8.3 caps them at 1023 bytes).
pub const MAX_CREDENTIAL_ID_LEN: usize = 1023;

/// The fixed-size head of authenticator data.
const HEAD_LEN: usize = 37;

/// Parsed authenticator data, borrowing from the bytes it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthenticatorData<'a> {
    /// SHA-256 of the RP ID the authenticator scoped the credential to.
    pub rp_id_hash: &'a [u8; 32],
    /// The flags byte.
    pub flags: Flags,
    /// The signature counter (0 if the authenticator keeps none).
    pub sign_count: u32,
    /// Present iff AT is set.
    pub attested_credential_data: Option<AttestedCredentialData<'a>>,
    /// The raw CBOR extensions map; present iff ED is set.
    pub extensions: Option<&'a [u8]>,
}

/// Attested credential data (§6.5.2). Some platform authenticators (macOS Touch ID through
/// Chrome) include it in assertions too; we parse it for framing and otherwise ignore it — the key
/// that verifies is always the enrolled one, never one the assertion carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttestedCredentialData<'a> {
    /// The authenticator model.
    pub aaguid: &'a [u8; 16],
    /// The credential id.
    pub credential_id: &'a [u8],
    /// The credential public key, raw COSE_Key (one well-formed CBOR item; not validated as a key).
    pub credential_public_key: &'a [u8],
}

impl<'a> AuthenticatorData<'a> {
    /// Parse authenticator data, checking its framing: the flags say exactly what follows the head.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, AuthDataError> {
        let (head, mut rest) = bytes
            .split_first_chunk::<HEAD_LEN>()
            .ok_or(AuthDataError::TooShort { len: bytes.len() })?;
        let [rp_id_hash @ .., flags, c0, c1, c2, c3] = head;
        let flags = Flags(*flags);
        let sign_count = u32::from_be_bytes([*c0, *c1, *c2, *c3]);

        let attested_credential_data = if flags.attested_credential_data() {
            let (data, after) = AttestedCredentialData::parse(rest)?;
            rest = after;
            Some(data)
        } else {
            None
        };

        let extensions = if flags.extension_data() {
            // The extensions map must be the last thing and must end exactly at the end.
            let mut reader = cbor::Reader::new(rest);
            reader.map_len().map_err(AuthDataError::Extensions)?;
            let len = cbor::item_len(rest).map_err(AuthDataError::Extensions)?;
            let (map, after) = rest.split_at_checked(len).ok_or(AuthDataError::Extensions(
                CborError::Truncated { offset: len },
            ))?;
            rest = after;
            Some(map)
        } else {
            None
        };

        if !rest.is_empty() {
            return Err(AuthDataError::TrailingBytes { count: rest.len() });
        }
        Ok(Self {
            rp_id_hash,
            flags,
            sign_count,
            attested_credential_data,
            extensions,
        })
    }

    /// §7.2 step 15: the credential is scoped to our RP ID.
    pub fn check_rp_id(&self, rp_id: &str) -> Result<(), AuthDataError> {
        let expected: [u8; 32] = Sha256::digest(rp_id.as_bytes()).into();
        if *self.rp_id_hash == expected {
            Ok(())
        } else {
            Err(AuthDataError::RpIdHashMismatch {
                expected,
                got: *self.rp_id_hash,
            })
        }
    }

    /// §7.2 step 16: a human was present. Always required: an approval without a touch proves
    /// nothing about a human.
    pub fn check_user_present(&self) -> Result<(), AuthDataError> {
        if self.flags.user_present() {
            Ok(())
        } else {
            Err(AuthDataError::UserNotPresent {
                flags: self.flags.0,
            })
        }
    }

    /// §7.2 step 17: the user was verified, when the policy requires it.
    pub fn check_user_verified(&self, required: bool) -> Result<(), AuthDataError> {
        if !required || self.flags.user_verified() {
            Ok(())
        } else {
            Err(AuthDataError::UserNotVerified {
                flags: self.flags.0,
            })
        }
    }

    /// §7.2 step 18: BS implies BE, and BE — fixed when the credential was created — matches what
    /// enrollment recorded, when it recorded anything. A change means another credential or a
    /// tampered registry.
    pub fn check_backup_flags(&self, enrolled: Option<bool>) -> Result<(), AuthDataError> {
        if self.flags.backup_state() && !self.flags.backup_eligible() {
            return Err(AuthDataError::BackupStateWithoutEligibility {
                flags: self.flags.0,
            });
        }
        match enrolled {
            Some(enrolled) if enrolled != self.flags.backup_eligible() => {
                Err(AuthDataError::BackupEligibilityMismatch {
                    enrolled,
                    got: self.flags.backup_eligible(),
                })
            }
            _ => Ok(()),
        }
    }
}

impl<'a> AttestedCredentialData<'a> {
    /// Parse from the start of `bytes`, returning what follows.
    fn parse(bytes: &'a [u8]) -> Result<(Self, &'a [u8]), AuthDataError> {
        let truncated = AuthDataError::AttestedDataTruncated;
        let (aaguid, rest) = bytes.split_first_chunk::<16>().ok_or(truncated.clone())?;
        let (len, rest) = rest.split_first_chunk::<2>().ok_or(truncated.clone())?;
        let len = usize::from(u16::from_be_bytes(*len));
        if len > MAX_CREDENTIAL_ID_LEN {
            return Err(AuthDataError::CredentialIdTooLong { len });
        }
        let (credential_id, rest) = rest.split_at_checked(len).ok_or(truncated)?;
        // The key's length is only known by walking its CBOR.
        let key_len = cbor::item_len(rest).map_err(AuthDataError::CredentialPublicKey)?;
        let (credential_public_key, rest) =
            rest.split_at_checked(key_len)
                .ok_or(AuthDataError::CredentialPublicKey(CborError::Truncated {
                    offset: key_len,
                }))?;
        Ok((
            Self {
                aaguid,
                credential_id,
                credential_public_key,
            },
            rest,
        ))
    }
}

/// The signature-counter rule (§7.2 step 22), the one place it is written: `got` moves the
/// counter forward past `stored`, or both sides keep none.
///
/// Authenticators that keep no counter (Apple platform authenticators, synced passkeys) always
/// send 0; with 0 stored that is fine. Otherwise the new value must exceed the stored one — an
/// equal or lower value suggests a cloned authenticator. The verifier, its offline audit and the
/// reference service's store all decide with this function.
pub fn sign_count_advances(stored: u32, got: u32) -> bool {
    (stored == 0 && got == 0) || got > stored
}

/// §7.2 step 22 as a check: [`sign_count_advances`], or the regression with both counts.
pub fn check_sign_count(stored: u32, got: u32) -> Result<(), AuthDataError> {
    if sign_count_advances(stored, got) {
        Ok(())
    } else {
        Err(AuthDataError::CounterRegression { stored, got })
    }
}

/// Why authenticator data was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthDataError {
    /// Shorter than the 37-byte head.
    #[error("authenticator data is {len} bytes, shorter than the 37-byte minimum")]
    TooShort {
        /// The length found.
        len: usize,
    },
    /// AT is set but the attested credential data is cut short.
    #[error("attested credential data truncated")]
    AttestedDataTruncated,
    /// A credential id over [`MAX_CREDENTIAL_ID_LEN`].
    #[error("credential id of {len} bytes exceeds {MAX_CREDENTIAL_ID_LEN}")]
    CredentialIdTooLong {
        /// The declared length.
        len: usize,
    },
    /// The attested credential public key is not one CBOR item.
    #[error("attested credential public key: {0}")]
    CredentialPublicKey(CborError),
    /// ED is set but no well-formed CBOR map follows.
    #[error("extensions: {0}")]
    Extensions(CborError),
    /// Bytes the flags do not account for.
    #[error("{count} trailing byte(s) in authenticator data")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// The credential is scoped to another RP ID.
    #[error("rpIdHash mismatch")]
    RpIdHashMismatch {
        /// SHA-256 of the expected RP ID.
        expected: [u8; 32],
        /// The hash in the authenticator data.
        got: [u8; 32],
    },
    /// UP is not set.
    #[error("user not present (flags {flags:#04x})")]
    UserNotPresent {
        /// The flags byte.
        flags: u8,
    },
    /// UV is required and not set.
    #[error("user not verified (flags {flags:#04x})")]
    UserNotVerified {
        /// The flags byte.
        flags: u8,
    },
    /// BS set without BE: a combination the specification rules out.
    #[error("backup state set without backup eligibility (flags {flags:#04x})")]
    BackupStateWithoutEligibility {
        /// The flags byte.
        flags: u8,
    },
    /// BE differs from what enrollment recorded.
    #[error("backup eligibility {got} differs from enrolled {enrolled}")]
    BackupEligibilityMismatch {
        /// BE as enrolled.
        enrolled: bool,
        /// BE in this assertion.
        got: bool,
    },
    /// The counter did not move forward.
    #[error("sign count {got} does not exceed stored {stored}")]
    CounterRegression {
        /// The stored counter.
        stored: u32,
        /// The counter in this assertion.
        got: u32,
    },
}

impl AuthDataError {
    /// The wire reason code.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::RpIdHashMismatch { .. } => ReasonCode::RpMismatch,
            Self::UserNotPresent { .. } => ReasonCode::UserNotPresent,
            Self::UserNotVerified { .. } => ReasonCode::UserNotVerified,
            Self::BackupEligibilityMismatch { .. } => ReasonCode::BackupEligibilityMismatch,
            Self::CounterRegression { .. } => ReasonCode::CounterRegression,
            Self::TooShort { .. }
            | Self::AttestedDataTruncated
            | Self::CredentialIdTooLong { .. }
            | Self::CredentialPublicKey(_)
            | Self::Extensions(_)
            | Self::TrailingBytes { .. }
            | Self::BackupStateWithoutEligibility { .. } => ReasonCode::EvidenceMalformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(flags: u8, count: u32) -> Vec<u8> {
        let mut out = Sha256::digest(b"example.org").to_vec();
        out.push(flags);
        out.extend_from_slice(&count.to_be_bytes());
        out
    }

    /// A minimal attested credential data block with a tiny (not necessarily valid) COSE map.
    fn attested(cred_id: &[u8]) -> Vec<u8> {
        let mut out = vec![0xaa; 16];
        out.extend_from_slice(&(cred_id.len() as u16).to_be_bytes());
        out.extend_from_slice(cred_id);
        out.extend_from_slice(&[0xa1, 0x01, 0x02]);
        out
    }

    #[test]
    fn parses_the_head() {
        let bytes = head(0x05, 0x0102_0304);
        let ad = AuthenticatorData::parse(&bytes).unwrap();
        assert_eq!(ad.flags, Flags(0x05));
        assert_eq!(ad.sign_count, 0x0102_0304);
        assert_eq!(ad.attested_credential_data, None);
        assert_eq!(ad.extensions, None);
        assert!(ad.check_rp_id("example.org").is_ok());
    }

    #[test]
    fn refuses_short_input() {
        for len in 0..HEAD_LEN {
            assert_eq!(
                AuthenticatorData::parse(&vec![0x01; len]),
                Err(AuthDataError::TooShort { len })
            );
        }
    }

    #[test]
    fn refuses_trailing_bytes_without_flags() {
        let mut bytes = head(0x01, 0);
        bytes.push(0xa0);
        let err = AuthenticatorData::parse(&bytes).unwrap_err();
        assert_eq!(err, AuthDataError::TrailingBytes { count: 1 });
        assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
    }

    #[test]
    fn parses_attested_credential_data() {
        let mut bytes = head(0x41, 0);
        bytes.extend_from_slice(&attested(&[7, 8, 9]));
        let ad = AuthenticatorData::parse(&bytes).unwrap();
        let acd = ad.attested_credential_data.unwrap();
        assert_eq!(acd.aaguid, &[0xaa; 16]);
        assert_eq!(acd.credential_id, [7, 8, 9]);
        assert_eq!(acd.credential_public_key, [0xa1, 0x01, 0x02]);

        // Cut anywhere inside: refused.
        for cut in HEAD_LEN..bytes.len() {
            assert!(
                AuthenticatorData::parse(&bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        // AT flag without data.
        assert_eq!(
            AuthenticatorData::parse(&head(0x41, 0)),
            Err(AuthDataError::AttestedDataTruncated)
        );
        // Data without the AT flag.
        let mut no_flag = head(0x01, 0);
        no_flag.extend_from_slice(&attested(&[7]));
        assert!(matches!(
            AuthenticatorData::parse(&no_flag),
            Err(AuthDataError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn credential_id_length_is_capped() {
        let mut ok = head(0x41, 0);
        ok.extend_from_slice(&attested(&[1; MAX_CREDENTIAL_ID_LEN]));
        assert!(AuthenticatorData::parse(&ok).is_ok());
        let mut long = head(0x41, 0);
        long.extend_from_slice(&attested(&[1; MAX_CREDENTIAL_ID_LEN + 1]));
        assert_eq!(
            AuthenticatorData::parse(&long),
            Err(AuthDataError::CredentialIdTooLong { len: 1024 })
        );
    }

    #[test]
    fn extensions_must_be_one_map_ending_the_data() {
        let mut bytes = head(0x81, 0);
        bytes.extend_from_slice(&[0xa1, 0x61, b'x', 0xf5]);
        let ad = AuthenticatorData::parse(&bytes).unwrap();
        assert_eq!(ad.extensions, Some(&[0xa1, 0x61, b'x', 0xf5][..]));

        let mut both = head(0xc1, 0);
        both.extend_from_slice(&attested(&[1]));
        both.extend_from_slice(&[0xa0]);
        let ad = AuthenticatorData::parse(&both).unwrap();
        assert_eq!(ad.extensions, Some(&[0xa0][..]));

        let mut trailing = bytes.clone();
        trailing.push(0);
        assert_eq!(
            AuthenticatorData::parse(&trailing),
            Err(AuthDataError::TrailingBytes { count: 1 })
        );
        let mut not_map = head(0x81, 0);
        not_map.push(0x80);
        assert!(matches!(
            AuthenticatorData::parse(&not_map),
            Err(AuthDataError::Extensions(_))
        ));
        assert!(matches!(
            AuthenticatorData::parse(&head(0x81, 0)),
            Err(AuthDataError::Extensions(_))
        ));
    }

    #[test]
    fn rp_id_hash_must_match() {
        let bytes = head(0x01, 0);
        let ad = AuthenticatorData::parse(&bytes).unwrap();
        let err = ad.check_rp_id("example.com").unwrap_err();
        assert!(matches!(err, AuthDataError::RpIdHashMismatch { .. }));
        assert_eq!(err.reason_code(), ReasonCode::RpMismatch);
    }

    #[test]
    fn user_presence_and_verification() {
        let bytes = head(0x04, 0);
        let ad = AuthenticatorData::parse(&bytes).unwrap();
        assert_eq!(
            ad.check_user_present().unwrap_err().reason_code(),
            ReasonCode::UserNotPresent
        );
        assert!(ad.check_user_verified(true).is_ok());

        let bytes = head(0x01, 0);
        let ad = AuthenticatorData::parse(&bytes).unwrap();
        assert!(ad.check_user_present().is_ok());
        assert!(ad.check_user_verified(false).is_ok());
        assert_eq!(
            ad.check_user_verified(true).unwrap_err().reason_code(),
            ReasonCode::UserNotVerified
        );
    }

    #[test]
    fn backup_flags() {
        let parse_check = |flags: u8, enrolled: Option<bool>| {
            let bytes = head(flags, 0);
            let ad = AuthenticatorData::parse(&bytes).unwrap();
            ad.check_backup_flags(enrolled).map_err(|e| e.reason_code())
        };
        assert_eq!(parse_check(0x01, None), Ok(()));
        assert_eq!(parse_check(0x09, None), Ok(()));
        assert_eq!(parse_check(0x19, None), Ok(()));
        assert_eq!(parse_check(0x19, Some(true)), Ok(()));
        assert_eq!(parse_check(0x01, Some(false)), Ok(()));
        assert_eq!(parse_check(0x11, None), Err(ReasonCode::EvidenceMalformed));
        assert_eq!(
            parse_check(0x11, Some(false)),
            Err(ReasonCode::EvidenceMalformed)
        );
        assert_eq!(
            parse_check(0x01, Some(true)),
            Err(ReasonCode::BackupEligibilityMismatch)
        );
        assert_eq!(
            parse_check(0x09, Some(false)),
            Err(ReasonCode::BackupEligibilityMismatch)
        );
    }

    #[test]
    fn sign_count_rules() {
        assert_eq!(check_sign_count(0, 0), Ok(()));
        assert_eq!(check_sign_count(0, 1), Ok(()));
        assert_eq!(check_sign_count(5, 6), Ok(()));
        assert_eq!(check_sign_count(5, u32::MAX), Ok(()));
        for (stored, got) in [(5, 5), (5, 4), (5, 0), (u32::MAX, u32::MAX)] {
            let err = check_sign_count(stored, got).unwrap_err();
            assert_eq!(err, AuthDataError::CounterRegression { stored, got });
            assert_eq!(err.reason_code(), ReasonCode::CounterRegression);
        }
    }

    #[test]
    fn the_counter_rule_advances_or_both_keep_none() {
        for (stored, got) in [(0, 0), (0, 1), (5, 6), (5, u32::MAX)] {
            assert!(sign_count_advances(stored, got), "{stored} -> {got}");
        }
        for (stored, got) in [(5, 5), (5, 4), (5, 0), (1, 0), (u32::MAX, u32::MAX)] {
            assert!(!sign_count_advances(stored, got), "{stored} -> {got}");
        }
    }
}
