//! The decision challenge: `nonce || op_hash`, the bytes an approver's authenticator signs.
//!
//! A login challenge is a bare [`NONCE_LEN`]-byte nonce; a decision challenge is
//! [`DECISION_CHALLENGE_LEN`] bytes. The lengths differ on purpose: a login assertion can never
//! pass as evidence for an action, and an action's evidence can never open a session. Services
//! build and split challenges here so that the layout the verifier checks is written once
//! (docs/SPEC.md §4).

/// Length of the server's random nonce, alone (a login challenge) or first in a decision
/// challenge.
pub const NONCE_LEN: usize = 32;

/// Length of a decision challenge: the nonce, then the 32-byte op_hash.
pub const DECISION_CHALLENGE_LEN: usize = NONCE_LEN + 32;

/// The challenge an approver signs to decide one action: `nonce || op_hash`.
pub fn decision_challenge(
    nonce: &[u8; NONCE_LEN],
    op_hash: &[u8; 32],
) -> [u8; DECISION_CHALLENGE_LEN] {
    let mut out = [0u8; DECISION_CHALLENGE_LEN];
    for (slot, byte) in out.iter_mut().zip(nonce.iter().chain(op_hash)) {
        *slot = *byte;
    }
    out
}

/// Split a signed decision challenge into its nonce and its op_hash; `None` unless it is exactly
/// [`DECISION_CHALLENGE_LEN`] bytes (a login challenge, for one, is not a decision).
pub fn split_decision_challenge(challenge: &[u8]) -> Option<(&[u8; NONCE_LEN], &[u8; 32])> {
    let whole: &[u8; DECISION_CHALLENGE_LEN] = challenge.try_into().ok()?;
    let (nonce, op_hash) = whole.split_first_chunk::<NONCE_LEN>()?;
    Some((nonce, op_hash.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_challenge_splits_back_into_its_halves() {
        let challenge = decision_challenge(&[1; 32], &[2; 32]);
        assert_eq!(challenge[..32], [1; 32]);
        assert_eq!(challenge[32..], [2; 32]);
        assert_eq!(
            split_decision_challenge(&challenge),
            Some((&[1; 32], &[2; 32]))
        );
    }

    #[test]
    fn only_64_bytes_are_a_decision_challenge() {
        assert_eq!(split_decision_challenge(&[0; 32]), None);
        assert_eq!(split_decision_challenge(&[0; 63]), None);
        assert_eq!(split_decision_challenge(&[0; 65]), None);
        assert_eq!(split_decision_challenge(&[]), None);
    }
}
