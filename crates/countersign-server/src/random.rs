//! Random identifiers, nonces and tokens from the operating system's generator.

use countersign::b64;

/// `n` random bytes. The OS generator failing is not recoverable for a security service.
pub(crate) fn bytes<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out)?;
    Ok(out)
}

/// A fresh approval id: `apv_` and 16 random bytes in base64url.
pub(crate) fn approval_id() -> Result<String, getrandom::Error> {
    Ok(format!("apv_{}", b64::encode(&bytes::<16>()?)))
}
