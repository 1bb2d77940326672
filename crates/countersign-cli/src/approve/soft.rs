//! TEST ONLY: the deterministic software key (`countersign_softkey::ctap2`) as a CTAP2 token,
//! so the end-to-end tests run the real flow and the real CTAP2 client with no USB.
//!
//! Compiled only into debug builds with the `testing` feature (`cfg(all(feature = "testing",
//! debug_assertions))`): a release build has neither this module nor the hidden
//! `--soft-ctap2-key` flag that reaches it, whatever features it was built with.
//!
//! The key file is JSON: `{"fixture": "alice-es256", "rp_id": "...", "user_verification": true,
//! "sign_count": 0}`. The counter is written back after every assertion, as a real key keeps
//! its own, so consecutive runs never present a regressed counter.

use super::key::{Authenticator, KeyError, KeyRequest, Signed, sign_with};
use countersign_softkey::SoftKey;
use countersign_softkey::ctap2::Ctap2Key;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use webauthn_authenticator_rs::error::{CtapError, WebauthnCError};
use webauthn_authenticator_rs::transport::Token;
use webauthn_authenticator_rs::ui::UiCallback;
use webauthn_rs_proto::AuthenticatorTransport;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    fixture: String,
    rp_id: String,
    user_verification: bool,
    #[serde(default)]
    sign_count: u32,
}

/// The software key named by a key file.
#[derive(Debug)]
pub(crate) struct SoftCtap2 {
    path: PathBuf,
    file: KeyFile,
    runtime: tokio::runtime::Handle,
}

impl SoftCtap2 {
    pub(crate) fn open(path: &Path, runtime: &tokio::runtime::Handle) -> anyhow::Result<Self> {
        let text = std::fs::read(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: serde_json::from_slice(&text)?,
            runtime: runtime.clone(),
        })
    }
}

impl Authenticator for SoftCtap2 {
    fn sign(&mut self, request: &KeyRequest<'_>) -> Result<Signed, KeyError> {
        let key =
            SoftKey::fixture(&self.file.fixture).map_err(|e| KeyError::Failed(e.to_string()))?;
        let mut key = Ctap2Key::new(key, &self.file.rp_id).with_sign_count(self.file.sign_count);
        if !self.file.user_verification {
            key = key.without_user_verification();
        }
        let shared = Arc::new(Mutex::new(key));
        let signed = sign_with(&self.runtime, SoftToken(shared.clone()), request);
        if let Ok(key) = shared.lock() {
            self.file.sign_count = key.sign_count();
        }
        let text = serde_json::to_vec(&self.file).map_err(|e| KeyError::Failed(e.to_string()))?;
        std::fs::write(&self.path, text).map_err(|e| KeyError::Failed(e.to_string()))?;
        signed
    }
}

/// The software key below the library's transport trait: CTAP2 command bytes in, reply out.
#[derive(Debug)]
struct SoftToken(Arc<Mutex<Ctap2Key>>);

#[async_trait::async_trait]
impl Token for SoftToken {
    type Id = ();

    fn get_transport(&self) -> AuthenticatorTransport {
        AuthenticatorTransport::Usb
    }

    async fn transmit_raw<U>(&mut self, cbor: &[u8], ui: &U) -> Result<Vec<u8>, WebauthnCError>
    where
        U: UiCallback,
    {
        if cbor.first() == Some(&countersign_softkey::ctap2::CMD_GET_ASSERTION) {
            // What a USB key's keep-alive (status UPNEEDED) makes the client say.
            ui.request_touch();
        }
        let mut key = self.0.lock().map_err(|_| WebauthnCError::Internal)?;
        key.transmit(cbor)
            .map_err(|status| WebauthnCError::Ctap(CtapError::from(status.0)))
    }

    async fn cancel(&mut self) -> Result<(), WebauthnCError> {
        Ok(())
    }

    async fn init(&mut self) -> Result<(), WebauthnCError> {
        Ok(())
    }

    async fn close(&mut self) -> Result<(), WebauthnCError> {
        Ok(())
    }
}
