//! What the subcommands read besides their arguments: a file or stdin, and the signature backend
//! a `--backend` names.

use anyhow::Context as _;
use clap::ValueEnum;
use std::io::Read as _;
use std::path::PathBuf;

/// The bytes of PATH, or of stdin for `-`.
pub(crate) fn read_input(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .context("reading stdin")?;
        Ok(buf)
    } else {
        std::fs::read(path).with_context(|| format!("reading {}", path.display()))
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum BackendChoice {
    /// The fastest backend compiled in.
    Auto,
    /// Pure Rust (p256, p384, ed25519-dalek, rsa).
    Rustcrypto,
    /// ring (C and assembly).
    Ring,
}

/// The signature backend a `--backend` names.
pub(crate) fn backend(
    choice: BackendChoice,
) -> anyhow::Result<&'static dyn countersign::webauthn::SignatureBackend> {
    let wanted = match choice {
        BackendChoice::Auto => return Ok(countersign::webauthn::default_backend()),
        BackendChoice::Rustcrypto => "rustcrypto",
        BackendChoice::Ring => "ring",
    };
    countersign::webauthn::all_backends()
        .into_iter()
        .find(|b| b.name() == wanted)
        .with_context(|| format!("backend {wanted} is not compiled into this binary"))
}
