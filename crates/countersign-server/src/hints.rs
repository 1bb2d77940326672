//! WebAuthn Level 3 `hints`: which kind of authenticator the browser should offer first when the
//! approver page calls `navigator.credentials.get()` (sign-in, each decision) and `.create()`
//! (enrollment).
//!
//! A hint is user interface, never policy: whatever the browser offers, the service and every
//! verifier check the same evidence, and the assurance level comes from that evidence alone. The
//! hints only save an approver from a dialog that starts with the wrong kind of authenticator
//! (a QR code on the phone in their hand, or the laptop's own passkey prompt when they carry a
//! security key). Browsers that do not know the member ignore it.
//!
//! The order, unless the operator fixes one with `webauthn_hints` (docs/OPERATIONS.md §3):
//! - on a phone, the phone's own passkey first (`client-device`), then a security key held to it
//!   (NFC or USB-C), then `hybrid` (another phone) last;
//! - elsewhere, a security key first: it is the only kind that can reach AAL3 (a device-bound key
//!   with verified attestation), and approvers of high-value tools are issued one. Then `hybrid`,
//!   the approver's phone over a QR code, which reaches them wherever their key is not; the
//!   computer's own authenticator last, since it ties the approver to that one machine.

use serde::{Deserialize, Serialize};

/// One `PublicKeyCredentialHint` (WebAuthn Level 3 §5.8.7), in its wire spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hint {
    /// A removable authenticator: USB, NFC or BLE security key.
    SecurityKey,
    /// The authenticator built into the device the page is open on.
    ClientDevice,
    /// A phone reached through a QR code (CTAP hybrid transport).
    Hybrid,
}

/// The order for a phone.
pub const PHONE: [Hint; 3] = [Hint::ClientDevice, Hint::SecurityKey, Hint::Hybrid];
/// The order for any other device.
pub const OTHER: [Hint; 3] = [Hint::SecurityKey, Hint::Hybrid, Hint::ClientDevice];

/// The hints for a request: the operator's fixed list when configured, else by device.
///
/// `mobile` is the `Sec-CH-UA-Mobile` request header (`?1` or `?0`, sent by Chromium-based
/// browsers), which decides when present; otherwise a `User-Agent` containing `Mobi` is a phone,
/// the rule MDN's user-agent guide recommends (an iPad that asks for desktop sites is not one,
/// and gets the other order).
pub fn for_request(
    configured: Option<&[Hint]>,
    mobile: Option<&str>,
    user_agent: Option<&str>,
) -> Vec<Hint> {
    if let Some(fixed) = configured {
        return fixed.to_vec();
    }
    let phone = match mobile.map(str::trim) {
        Some("?1") => true,
        Some("?0") => false,
        _ => user_agent.is_some_and(|ua| ua.contains("Mobi")),
    };
    if phone {
        PHONE.to_vec()
    } else {
        OTHER.to_vec()
    }
}

/// The hints for `create()` when enrollment demands verified attestation: without `hybrid`,
/// whose authenticators (synced phone passkeys) send no attestation that policy could accept,
/// so offering them first only leads to a refusal.
pub fn for_attested_creation(hints: &[Hint]) -> Vec<Hint> {
    hints
        .iter()
        .copied()
        .filter(|h| *h != Hint::Hybrid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANDROID: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 \
        (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36";
    const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) \
        AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1";
    const LINUX: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 \
        (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

    #[test]
    fn a_phone_is_offered_its_own_passkey_first() {
        assert_eq!(for_request(None, None, Some(IPHONE)), PHONE);
        assert_eq!(for_request(None, Some("?1"), Some(LINUX)), PHONE);
        assert_eq!(for_request(None, None, Some(ANDROID)), PHONE);
    }

    #[test]
    fn elsewhere_a_security_key_first() {
        assert_eq!(for_request(None, None, Some(LINUX)), OTHER);
        assert_eq!(for_request(None, None, None), OTHER);
        // The client hint, when sent, outranks the user agent string.
        assert_eq!(for_request(None, Some("?0"), Some(ANDROID)), OTHER);
    }

    #[test]
    fn a_configured_list_is_used_as_is_on_every_device() {
        let fixed = [Hint::Hybrid];
        assert_eq!(for_request(Some(&fixed), None, Some(IPHONE)), fixed);
        assert_eq!(for_request(Some(&[]), None, Some(LINUX)), []);
    }

    #[test]
    fn verified_attestation_drops_hybrid() {
        assert_eq!(
            for_attested_creation(&OTHER),
            [Hint::SecurityKey, Hint::ClientDevice]
        );
    }

    #[test]
    fn wire_names_are_the_webauthn_ones() {
        let names = serde_json::to_value(OTHER).unwrap_or_default();
        assert_eq!(
            names,
            serde_json::json!(["security-key", "hybrid", "client-device"])
        );
    }
}
