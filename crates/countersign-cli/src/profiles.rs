//! Operator profiles on the command line: `--profile FILE=SHA256`, pinned by digest.

use anyhow::{Context as _, bail};
use clap::Args;
use countersign::{Profile, ProfileRegistry};
use std::path::PathBuf;

/// Extra canonicalization profiles, each pinned by the SHA-256 of its JCS form.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ProfileArgs {
    /// Add an operator profile from FILE, pinned by its digest (64 hex digits, as printed by
    /// `countersign profile-digest FILE`). A file whose digest differs is refused (exit 2).
    /// Repeatable. The built-in profiles are always present.
    #[arg(long = "profile", value_name = "FILE=SHA256")]
    profiles: Vec<String>,
}

impl ProfileArgs {
    /// The built-in profiles plus every pinned operator profile.
    pub(crate) fn registry(&self) -> anyhow::Result<ProfileRegistry> {
        let mut registry = ProfileRegistry::builtin();
        for spec in &self.profiles {
            let Some((path, digest)) = spec.rsplit_once('=') else {
                bail!("--profile {spec:?}: expected FILE=SHA256");
            };
            let digest = parse_digest(digest).with_context(|| format!("--profile {spec:?}"))?;
            let bytes = std::fs::read(path).with_context(|| format!("reading profile {path}"))?;
            registry
                .insert_pinned(&bytes, digest)
                .with_context(|| format!("profile {path}"))?;
        }
        Ok(registry)
    }
}

fn parse_digest(text: &str) -> anyhow::Result<[u8; 32]> {
    let mut out = [0u8; 32];
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("the digest must be 64 hexadecimal digits");
    }
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).context("hex")?;
        *byte = u8::from_str_radix(pair, 16).context("hex")?;
    }
    Ok(out)
}

/// `countersign profile-digest FILE`: validate a profile definition and print its pin.
pub(crate) fn print_digest(path: &PathBuf) -> anyhow::Result<u8> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let profile =
        Profile::from_definition(&bytes).with_context(|| format!("profile {}", path.display()))?;
    let hex: String = profile.digest.iter().map(|b| format!("{b:02x}")).collect();
    println!("{hex}  {}", profile.id);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_64_hex_digits() {
        assert!(parse_digest(&"ab".repeat(32)).is_ok());
        assert!(parse_digest(&"ab".repeat(31)).is_err());
        assert!(parse_digest(&"zz".repeat(32)).is_err());
        assert_eq!(parse_digest(&"0f".repeat(32)).ok(), Some([0x0f; 32]));
    }
}
