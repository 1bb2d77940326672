//! The demo's own files: where its service is (`demo.json`) and the demo software key
//! (`demo-key.json`), both written by `countersign demo` and read by `countersign demo approve`.

use super::files;
use anyhow::Context as _;
use countersign::{CredentialRecord, b64};
use countersign_server::demo::{DEMO_AAGUID, DEMO_PRINCIPAL};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;

/// What `demo approve` needs to find the demo: written by the demo, read by `demo approve`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct DemoState {
    /// The service's base URL (its socket address).
    pub(super) service: String,
    pub(super) rp_id: String,
    /// The approver page's origin (what the key signs into clientDataJSON).
    pub(super) origin: String,
    /// The held call's approval, once there is one.
    pub(super) approval_id: Option<String>,
}

impl DemoState {
    pub(super) fn read(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(files::STATE);
        let text = std::fs::read(&path).with_context(|| {
            format!(
                "{} is not the data directory of a running `countersign demo` (no {})",
                dir.display(),
                files::STATE
            )
        })?;
        serde_json::from_slice(&text).with_context(|| format!("reading {}", path.display()))
    }

    pub(super) fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let path = dir.join(files::STATE);
        std::fs::write(&path, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// The demo software key: an ES256 software authenticator whose seed is a file of the demo.
pub(super) struct DemoKey {
    key: countersign_softkey::SoftKey,
}

/// `demo-key.json`: the seed, and what it is.
#[derive(Serialize, Deserialize)]
struct DemoKeyFile {
    kind: String,
    seed: String,
}

const DEMO_KEY_KIND: &str = "countersign demo software key: not a hardware authenticator; \
                             accepted only by `countersign demo`";

impl DemoKey {
    fn from_seed(seed: [u8; 32]) -> anyhow::Result<Self> {
        let key = countersign_softkey::SoftKey::from_seed(countersign_softkey::Alg::Es256, seed)
            .map_err(|e| anyhow::anyhow!("deriving the demo key: {e}"))?
            .with_aaguid(DEMO_AAGUID.0);
        Ok(Self { key })
    }

    /// A new key, its seed written owner-only into the demo's directory.
    pub(super) fn create(dir: &Path) -> anyhow::Result<Self> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        let file = DemoKeyFile {
            kind: DEMO_KEY_KIND.to_owned(),
            seed: b64::encode(&seed),
        };
        write_private(&dir.join(files::KEY), &serde_json::to_vec_pretty(&file)?)?;
        Self::from_seed(seed)
    }

    pub(super) fn read(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(files::KEY);
        let text = std::fs::read(&path)
            .with_context(|| format!("{} has no demo key ({})", dir.display(), files::KEY))?;
        let file: DemoKeyFile =
            serde_json::from_slice(&text).with_context(|| format!("reading {}", path.display()))?;
        let seed: [u8; 32] = b64::decode(&file.seed)
            .ok()
            .and_then(|s| s.try_into().ok())
            .with_context(|| {
                format!("{}: the seed is not 32 bytes of base64url", path.display())
            })?;
        Self::from_seed(seed)
    }

    /// Its registry record: named as the demo key, attestation `none` (nothing vouches for a
    /// software key), device-bound as it is.
    pub(super) fn record(&self) -> CredentialRecord {
        CredentialRecord {
            credential_id: self.key.credential_id().to_vec(),
            principal: DEMO_PRINCIPAL.to_owned(),
            public_key: self.key.cose_public_key(),
            aaguid: Some(DEMO_AAGUID),
            backup_eligible: Some(false),
            attestation: Some(countersign::AttestationRecord {
                format: "none".to_owned(),
                chain_verified: false,
                root: None,
            }),
            sign_count: 0,
            revoked: false,
        }
    }

    /// An assertion over `challenge` as the service's JSON body: user presence only, no
    /// counter (no user is verified; the verdict says AAL1).
    pub(super) fn sign(&self, state: &DemoState, challenge: &[u8]) -> anyhow::Result<Value> {
        use countersign_softkey::{AssertionRequest, Ceremony, Flags};
        let request = AssertionRequest::from(Ceremony {
            flags: Flags {
                up: true,
                ..Flags::NONE
            },
            sign_count: 0,
            ..Ceremony::get(&state.rp_id, &state.origin, challenge.to_vec())
        });
        let signed = self
            .key
            .assert(&request)
            .map_err(|e| anyhow::anyhow!("signing with the demo key: {e}"))?;
        Ok(json!({
            "credential_id": b64::encode(&signed.credential_id),
            "client_data_json": b64::encode(&signed.client_data_json),
            "authenticator_data": b64::encode(&signed.authenticator_data),
            "signature": b64::encode(&signed.signature),
        }))
    }
}

/// Write a file only its owner can read (a key, a token).
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))
}
