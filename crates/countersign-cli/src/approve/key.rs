//! The approver's authenticator, reached over CTAP2 by `webauthn-authenticator-rs`.
//!
//! The command builds clientDataJSON itself, exactly as a browser on the approver page would
//! (Chrome's member order, the configured origin without a trailing slash), and has the key
//! sign its SHA-256 through [`AuthenticatorBackendHashedClientData`]: the library's own
//! clientDataJSON would name the origin with a trailing slash and carry `tokenBinding`, which the
//! verifier refuses. User verification is always required, as the service requires it: a key
//! with neither a PIN nor a built-in method is refused by the library's UV planning before it
//! is asked to sign.
//!
//! The flow takes its key through [`Authenticator`], so a test can hand it the software key
//! (`--soft-ctap2-key`, debug builds with the `testing` feature) below the same CTAP2 client.

use countersign::b64;
use sha2::{Digest as _, Sha256};
use std::sync::atomic::{AtomicBool, Ordering};
use webauthn_authenticator_rs::AuthenticatorBackendHashedClientData;
use webauthn_authenticator_rs::ctap2::CtapAuthenticator;
use webauthn_authenticator_rs::error::{CtapError, WebauthnCError};
use webauthn_authenticator_rs::transport::Token;
use webauthn_authenticator_rs::types::{CableRequestType, CableState, EnrollSampleStatus};
use webauthn_authenticator_rs::ui::UiCallback;
use webauthn_rs_proto::{
    AllowCredentials, PublicKeyCredentialRequestOptions, UserVerificationPolicy,
};

/// How long the key may wait for a touch, in milliseconds.
const TIMEOUT_MS: u32 = 60_000;

/// What the key is asked to sign.
#[derive(Debug)]
pub(crate) struct KeyRequest<'a> {
    pub(crate) rp_id: &'a str,
    pub(crate) client_data_json: &'a [u8],
    /// The credential to use; `None` lets the key pick its discoverable credential for the RP
    /// (sign-in, as the page does it).
    pub(crate) credential_id: Option<&'a [u8]>,
}

/// The key's answer.
#[derive(Debug)]
pub(crate) struct Signed {
    pub(crate) credential_id: Vec<u8>,
    pub(crate) authenticator_data: Vec<u8>,
    pub(crate) signature: Vec<u8>,
}

/// Why the key did not sign.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    #[error(
        "no security key found: plug one in (this build {})",
        if cfg!(feature = "security-key") {
            "opens USB keys"
        } else {
            "has no USB support: rebuild with `--features security-key`"
        }
    )]
    NoKey,
    #[error("the security key does not speak CTAP2 (FIDO2)")]
    NotCtap2,
    #[error(
        "the security key cannot verify you (it has neither a PIN nor a built-in method such as a \
         fingerprint) and the service requires user verification: set a PIN on the key first"
    )]
    NoUserVerification,
    #[error(
        "the security key holds no credential for RP ID {rp_id}{detail}: enroll it at this \
         service first"
    )]
    NoCredential { rp_id: String, detail: &'static str },
    #[error("the security key refused the PIN ({0:?})")]
    Pin(CtapError),
    #[error("the security key signed without verifying the user (UV flag not set)")]
    NotVerified,
    #[error("the security key failed: {0}")]
    Failed(String),
}

/// A security key the flow can ask for an assertion.
pub(crate) trait Authenticator {
    fn sign(&mut self, request: &KeyRequest<'_>) -> Result<Signed, KeyError>;
}

/// clientDataJSON for `challenge` at `origin`, byte for byte what Chrome writes for
/// `navigator.credentials.get()` in a top-level page.
pub(crate) fn client_data_json(challenge: &[u8], origin: &str) -> Vec<u8> {
    // serde_json escapes the origin as a JSON string; the members are written in Chrome's order.
    let origin = serde_json::Value::from(origin).to_string();
    format!(
        "{{\"type\":\"webauthn.get\",\"challenge\":\"{}\",\"origin\":{origin},\"crossOrigin\":false}}",
        b64::encode(challenge)
    )
    .into_bytes()
}

/// Sign with the CTAP2 authenticator behind `token`. Runs on the calling thread (not inside the
/// runtime): the library drives the key with blocking calls, while `runtime`'s worker runs the
/// I/O and timers a USB transport waits on.
pub(crate) fn sign_with<T: Token>(
    runtime: &tokio::runtime::Handle,
    token: T,
    request: &KeyRequest<'_>,
) -> Result<Signed, KeyError> {
    let ui = Prompt::default();
    let _inside = runtime.enter();
    let mut authenticator = runtime
        .block_on(CtapAuthenticator::new(token, &ui))
        .ok_or(KeyError::NotCtap2)?;
    let options = PublicKeyCredentialRequestOptions {
        // Not sent to the key (it signs the clientDataJSON hash); kept for the library's logs.
        challenge: Vec::new(),
        timeout: Some(TIMEOUT_MS),
        rp_id: request.rp_id.to_owned(),
        allow_credentials: request
            .credential_id
            .map(|id| AllowCredentials {
                type_: "public-key".to_owned(),
                id: id.to_vec(),
                transports: None,
            })
            .into_iter()
            .collect(),
        user_verification: UserVerificationPolicy::Required,
        hints: None,
        extensions: None,
    };
    let hash = Sha256::digest(request.client_data_json).to_vec();
    let credential = AuthenticatorBackendHashedClientData::perform_auth(
        &mut authenticator,
        hash,
        options,
        TIMEOUT_MS,
    )
    .map_err(|e| refusal(e, request))?;
    let authenticator_data = credential.response.authenticator_data;
    // Flags byte after the 32-byte RP ID hash; bit 2 is UV.
    if authenticator_data
        .get(32)
        .is_none_or(|flags| flags & 0x04 == 0)
    {
        return Err(KeyError::NotVerified);
    }
    Ok(Signed {
        credential_id: credential.raw_id,
        authenticator_data,
        signature: credential.response.signature,
    })
}

fn refusal(e: WebauthnCError, request: &KeyRequest<'_>) -> KeyError {
    match e {
        WebauthnCError::UserVerificationRequired => KeyError::NoUserVerification,
        WebauthnCError::Ctap(CtapError::Ctap2UnsupportedOption) => KeyError::NoUserVerification,
        WebauthnCError::Ctap(CtapError::Ctap2NoCredentials) => KeyError::NoCredential {
            rp_id: request.rp_id.to_owned(),
            detail: if request.credential_id.is_some() {
                " with the id this session signed in with"
            } else {
                ""
            },
        },
        WebauthnCError::Ctap(
            e @ (CtapError::Ctap2PinInvalid
            | CtapError::Ctap2PinBlocked
            | CtapError::Ctap2PinAuthBlocked
            | CtapError::Ctap2PinNotSet),
        ) => KeyError::Pin(e),
        other => KeyError::Failed(other.to_string()),
    }
}

/// The library's prompts, on stderr (stdout carries the review and the verdict). The PIN is
/// read from the terminal without echo and goes only to the key.
#[derive(Debug, Default)]
struct Prompt {
    touch_asked: AtomicBool,
}

impl UiCallback for Prompt {
    fn request_pin(&self) -> Option<String> {
        rpassword::prompt_password("PIN of your security key: ").ok()
    }

    fn request_touch(&self) {
        // Asked again at every keep-alive while the key waits: say it once.
        if !self.touch_asked.swap(true, Ordering::Relaxed) {
            eprintln!("countersign: touch your security key");
        }
    }

    fn processing(&self) {}

    fn fingerprint_enrollment_feedback(&self, _: u32, _: Option<EnrollSampleStatus>) {}

    fn cable_qr_code(&self, _: CableRequestType, _: String) {}

    fn dismiss_qr_code(&self) {}

    fn cable_status_update(&self, _: CableState) {}
}

/// The first USB FIDO2 key plugged in.
#[cfg(feature = "security-key")]
pub(crate) struct UsbKey {
    runtime: tokio::runtime::Handle,
}

#[cfg(feature = "security-key")]
impl UsbKey {
    pub(crate) fn new(runtime: &tokio::runtime::Handle) -> Self {
        Self {
            runtime: runtime.clone(),
        }
    }
}

#[cfg(feature = "security-key")]
impl Authenticator for UsbKey {
    fn sign(&mut self, request: &KeyRequest<'_>) -> Result<Signed, KeyError> {
        use webauthn_authenticator_rs::transport::Transport as _;
        use webauthn_authenticator_rs::usb::USBTransport;
        let token = self
            .runtime
            .block_on(async {
                let transport = USBTransport::new().await?;
                transport.tokens().await
            })
            .map_err(|e| KeyError::Failed(e.to_string()))?
            .into_iter()
            .next()
            .ok_or(KeyError::NoKey)?;
        sign_with(&self.runtime, token, request)
    }
}

/// No transport compiled in: say how to get one.
#[cfg(not(feature = "security-key"))]
#[derive(Debug)]
pub(crate) struct UsbKey;

#[cfg(not(feature = "security-key"))]
impl UsbKey {
    pub(crate) fn new(_: &tokio::runtime::Handle) -> Self {
        Self
    }
}

#[cfg(not(feature = "security-key"))]
impl Authenticator for UsbKey {
    fn sign(&mut self, _: &KeyRequest<'_>) -> Result<Signed, KeyError> {
        Err(KeyError::NoKey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_data_is_chromes_form_with_the_origin_as_configured() {
        assert_eq!(
            String::from_utf8(client_data_json(&[0xfb; 3], "https://approve.example.com")).unwrap(),
            "{\"type\":\"webauthn.get\",\"challenge\":\"-_v7\",\
             \"origin\":\"https://approve.example.com\",\"crossOrigin\":false}"
        );
        let parsed = countersign::webauthn::ClientData::parse(&client_data_json(
            &[1; 64],
            "http://localhost:8080",
        ))
        .unwrap();
        assert_eq!(parsed.challenge, vec![1; 64]);
    }
}
