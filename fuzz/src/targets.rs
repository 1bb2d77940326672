//! The eleven target bodies. Each panics on a bug; see the crate documentation for the oracles every
//! target shares, and each function's documentation for its own.

use crate::fixtures::{backends, good_cases};
use countersign::webauthn::{
    AuthenticatorData, ClientData, CosePublicKey, DerPolicy, PreparedSignature, PublicKeyMaterial,
};
use countersign::{
    ApprovalResult, CanonLimits, Case, EvidenceSlot, MemoryReplayState, ProfileRegistry, Verdict,
    admit_fields, admit_json, op_hash_document,
};
use std::sync::OnceLock;

/// Run `f` twice and insist on the same answer: no hidden state, no randomness, no dependence
/// on iteration order.
fn twice<T: PartialEq + std::fmt::Debug>(f: impl Fn() -> T) -> T {
    let first = f();
    let second = f();
    assert_eq!(first, second, "same input, two answers");
    first
}

/// [`twice`] where only the agreement matters.
fn same<T: PartialEq + std::fmt::Debug>(f: impl Fn() -> T) {
    let _ = twice(f);
}

/// Build the shared fixtures (the profile registry, the known-good signed approvals, the
/// backends) now. The targets call this before `afl::fuzz!` starts AFL++'s fork server, so every
/// forked process inherits them built: lazily, the first execution of each process would run the
/// fixtures' key parsing and signing too, and AFL++ would count those paths as the input's
/// coverage varying between runs (low "stability").
pub fn warm_up() {
    let _ = profiles();
    let _ = good_cases();
    let _ = backends();
}

fn profiles() -> &'static ProfileRegistry {
    static REGISTRY: OnceLock<ProfileRegistry> = OnceLock::new();
    REGISTRY.get_or_init(ProfileRegistry::builtin)
}

/// Strict JSON admission: `admit_json`, every built-in profile's `admit_fields`, and the op-hash
/// document reader. Also: fields a profile admitted are admitted again, unchanged, from their own
/// JCS bytes (canonicalization is idempotent, so a verifier re-admitting signed bytes agrees).
pub fn canon(data: &[u8]) {
    same(|| admit_json(data, CanonLimits::STRICT));
    same(|| admit_json(data, CanonLimits::STRICT.with_floats(true)));
    same(|| op_hash_document(profiles(), data));
    for profile in profiles().iter() {
        let Ok(fields) = twice(|| admit_fields(profile, data)) else {
            continue;
        };
        let again = admit_fields(profile, fields.jcs());
        assert_eq!(
            again.as_ref().map(|f| f.jcs()),
            Ok(fields.jcs()),
            "JCS not idempotent"
        );
    }
}

/// The CBOR reader, through the two public paths that run it on untrusted bytes: the credential
/// public key of attested credential data (AT) and the extensions map (ED) of authenticatorData.
/// Each framing must take exactly the bytes given, and a COSE key that parses must be one
/// well-formed CBOR item.
pub fn cbor(data: &[u8]) {
    let attested = frame(0x41, &[&[0; 16], &[0, 0], data]);
    let parsed = twice(|| AuthenticatorData::parse(&attested).map(|d| d.attested_credential_data));
    if let Ok(acd) = &parsed {
        let key = acd.map(|a| a.credential_public_key);
        assert_eq!(key, Some(data), "AT framing took other bytes than the key");
    }
    let extended = frame(0x81, &[data]);
    let parsed = twice(|| AuthenticatorData::parse(&extended).map(|d| d.extensions));
    if let Ok(ext) = parsed {
        assert_eq!(ext, Some(data), "ED framing took other bytes than the map");
    }
    if CosePublicKey::from_cose(data).is_ok() {
        assert!(parsed_ok(&attested), "a COSE key that is not one CBOR item");
    }
}

fn parsed_ok(auth_data: &[u8]) -> bool {
    AuthenticatorData::parse(auth_data).is_ok()
}

/// authenticatorData with `flags`, a zero rpIdHash and counter, then `parts`.
fn frame(flags: u8, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![0; 32];
    out.push(flags);
    out.extend_from_slice(&[0, 0, 0, 1]);
    for part in parts {
        out.extend_from_slice(part);
    }
    out
}

/// COSE_Key parsing. A key that parses is checked by every backend against a known-good
/// signature of its algorithm: the backends must agree (they are told to accept the same keys).
pub fn cose(data: &[u8]) {
    let key = twice(|| CosePublicKey::from_cose(data));
    let Ok(key) = key else { return };
    for good in good_cases() {
        if good.key.algorithm() != key.algorithm() {
            continue;
        }
        let answers = twice(|| verify_all(&key, &good.signed, &good.signature));
        assert!(
            answers.windows(2).all(|w| w[0] == w[1]),
            "backends disagree on a key: {answers:?}"
        );
        if answers.first() == Some(&true) {
            assert_eq!(
                key, good.key,
                "another key verified {}'s signature",
                good.id
            );
        }
    }
}

/// Whether each backend accepts `signature` over `signed` under `key` (strict DER).
fn verify_all(key: &CosePublicKey, signed: &[u8], signature: &[u8]) -> Vec<bool> {
    let Ok(prepared) = PreparedSignature::new(key, signature, DerPolicy::Strict) else {
        return vec![false; backends().len()];
    };
    backends()
        .iter()
        .map(|b| b.verify(key, signed, &prepared).is_ok())
        .collect()
}

/// ECDSA DER signatures (P-256 and P-384), under both policies, in place of a known-good
/// signature: strict acceptance implies lenient acceptance of the same (r, s); the backends agree;
/// and anything that verifies has the known signature's r (only (r, s) and (r, n - s) verify).
pub fn der(data: &[u8]) {
    for good in good_cases() {
        if !matches!(
            good.key.material(),
            PublicKeyMaterial::P256 { .. } | PublicKeyMaterial::P384 { .. }
        ) {
            continue;
        }
        let strict = twice(|| PreparedSignature::new(&good.key, data, DerPolicy::Strict));
        let lenient = twice(|| PreparedSignature::new(&good.key, data, DerPolicy::DangerLenient));
        if let Ok(s) = &strict {
            assert_eq!(
                lenient.as_ref().ok(),
                Some(s),
                "strict accepts, lenient does not"
            );
        }
        let Ok(prepared) = lenient else { continue };
        let answers: Vec<bool> = backends()
            .iter()
            .map(|b| b.verify(&good.key, &good.signed, &prepared).is_ok())
            .collect();
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
        if answers.first() == Some(&true) {
            let known = PreparedSignature::new(&good.key, &good.signature, DerPolicy::Strict);
            assert_eq!(
                Some(r_of(&prepared)),
                known.as_ref().map(r_of).ok(),
                "forged r"
            );
        }
    }
}

fn r_of(p: &PreparedSignature<'_>) -> Vec<u8> {
    match p {
        PreparedSignature::EcdsaP256(rs) => rs.get(..32).unwrap_or_default().to_vec(),
        PreparedSignature::EcdsaP384(rs) => rs.get(..48).unwrap_or_default().to_vec(),
        _ => Vec::new(),
    }
}

/// authenticatorData framing and its checks: the parsed head is the input's head, and AT / ED
/// are set exactly when their parts are present.
pub fn auth_data(data: &[u8]) {
    let Ok(parsed) = twice(|| AuthenticatorData::parse(data)) else {
        return;
    };
    assert_eq!(Some(&parsed.rp_id_hash[..]), data.get(..32));
    assert_eq!(Some(parsed.flags.0), data.get(32).copied());
    let count = data.get(33..37).and_then(|c| <[u8; 4]>::try_from(c).ok());
    assert_eq!(Some(parsed.sign_count), count.map(u32::from_be_bytes));
    assert_eq!(
        parsed.flags.attested_credential_data(),
        parsed.attested_credential_data.is_some()
    );
    assert_eq!(parsed.flags.extension_data(), parsed.extensions.is_some());
    same(|| parsed.check_rp_id("pay.example.com"));
    same(|| parsed.check_user_present());
    same(|| parsed.check_user_verified(true));
    same(|| parsed.check_backup_flags(None));
    same(|| parsed.check_backup_flags(Some(true)));
}

/// clientDataJSON parsing and every check made on it.
pub fn client_data(data: &[u8]) {
    let Ok(cd) = twice(|| ClientData::parse(data)) else {
        return;
    };
    let origins = ["https://pay.example.com".to_owned()];
    same(|| cd.check_type());
    same(|| cd.check_challenge(&[7; 32]));
    same(|| cd.check_challenge(&cd.challenge));
    same(|| cd.check_origin(&origins));
    same(|| cd.check_cross_origin(false, &[]));
    same(|| cd.check_cross_origin(true, &origins));
    assert_eq!(cd.check_challenge(&cd.challenge), Ok(()), "own challenge");
}

/// The ApprovalResult envelope: parsing, and a round trip through its own serialization (what the
/// service stores and serves must read back as the same result).
pub fn envelope(data: &[u8]) {
    let Ok(result) = twice(|| ApprovalResult::from_json(data)) else {
        return;
    };
    let text = serde_json::to_vec(&result).unwrap_or_else(|e| panic!("serialize: {e}"));
    let again = ApprovalResult::from_json(&text);
    assert_eq!(
        again.as_ref().map(strip_reasons),
        Ok(strip_reasons(&result)),
        "round trip"
    );
}

/// A result without the (unserialized) reasons of malformed evidence slots.
fn strip_reasons(r: &ApprovalResult) -> ApprovalResult {
    let mut r = r.clone();
    for slot in &mut r.approver_evidence {
        if let EvidenceSlot::Malformed { reason, .. } = slot {
            reason.clear();
        }
    }
    r
}

/// A whole CASE through `verify_evidence`, on every backend:
/// - same verdict twice, and the same effect, decision and reason on every backend;
/// - an ALLOW that rests on evidence is not given again for the same evidence (replay);
/// - the same CASE with every signature changed is not ALLOWed on evidence;
/// - a known-good approving CASE whose signature the input rewrites is never ALLOWed.
pub fn case(data: &[u8]) {
    // (The registry is a hash map: compare what it holds, not its Debug order.)
    let parsed = twice(|| {
        Case::from_json(data).map(|c| {
            let mut keys: Vec<_> = c.registry.iter().map(|e| e.record().clone()).collect();
            keys.sort_by(|a, b| a.credential_id.cmp(&b.credential_id));
            (c.action, c.result, keys, format!("{:?}", c.policy), c.now)
        })
    });
    if let (Ok(_), Ok(case)) = (parsed, Case::from_json(data)) {
        let verdict = verdict_everywhere(&case);
        if verdict.is_allow() && !verdict.approvers.is_empty() {
            let mut replay = MemoryReplayState::new();
            let first = case.verify_with(backends()[0], &mut replay);
            let second = case.verify_with(backends()[0], &mut replay);
            assert!(
                first.is_allow() && !second.is_allow(),
                "replayed evidence ALLOWed"
            );
        }
        if verdict.is_allow() {
            let mut changed = case.clone();
            let flip = data.len();
            for slot in &mut changed.result.approver_evidence {
                if let EvidenceSlot::Decoded(entry) = slot {
                    change_signature(&mut entry.signature, flip);
                }
            }
            assert_not_allowed_on_evidence(&changed);
        }
    }
    rewritten_signature(data);
}

/// The verdict on every backend (they must agree) and twice on the first.
fn verdict_everywhere(case: &Case) -> Verdict {
    let fresh = |i: usize| case.verify_with(backends()[i], &mut MemoryReplayState::new());
    let verdict = twice(|| fresh(0));
    for i in 1..backends().len() {
        let other = fresh(i);
        let key = |v: &Verdict| (v.effective, v.decision, v.reason_code);
        assert_eq!(key(&other), key(&verdict), "backends disagree");
    }
    verdict
}

/// Flip one bit of a signature (an empty one gains a byte).
fn change_signature(signature: &mut Vec<u8>, at: usize) {
    match signature.len() {
        0 => signature.push(1),
        len => {
            if let Some(b) = signature.get_mut(at % len) {
                *b ^= 1 << (at % 8);
            }
        }
    }
}

fn assert_not_allowed_on_evidence(case: &Case) {
    let verdict = verdict_everywhere(case);
    assert!(
        !verdict.is_allow() || (verdict.approvers.is_empty() && !case.policy.require_evidence),
        "ALLOW with a changed signature: {verdict:?}"
    );
}

/// `data` rewrites the signature of one known-good case: byte 0 picks the case, byte 1 the
/// change (XOR a mask in, replace, truncate, extend), the rest is its operand.
fn rewritten_signature(data: &[u8]) {
    let [pick, how, rest @ ..] = data else { return };
    let cases = good_cases();
    let good = &cases[usize::from(*pick) % cases.len()];
    let mut signature = good.signature.clone();
    match how % 4 {
        0 => {
            let at = rest.first().map_or(0, |&b| usize::from(b));
            for (i, m) in rest.iter().skip(1).enumerate() {
                let len = signature.len();
                if let Some(b) = signature.get_mut((at + i) % len) {
                    *b ^= m;
                }
            }
        }
        1 => signature = rest.to_vec(),
        2 => signature.truncate(rest.first().map_or(0, |&b| usize::from(b))),
        _ => signature.extend_from_slice(if rest.is_empty() { &[0] } else { rest }),
    }
    if signature == good.signature {
        return;
    }
    let mut changed = good.case.clone();
    let Some(EvidenceSlot::Decoded(entry)) = changed.result.approver_evidence.first_mut() else {
        panic!("{}: first evidence entry not decoded", good.id)
    };
    entry.signature = signature;
    assert_not_allowed_on_evidence(&changed);
}

/// The conformance harness protocol's line reader: any line gets exactly one JSON object back,
/// on one line, with an `id` and exactly one of `verdict`, `error`, `unsupported`.
pub fn harness(data: &[u8]) {
    let line = String::from_utf8_lossy(data);
    let backend = backends()[0];
    let response = twice(|| crate::harness::answer(&line, backend));
    let object = response.as_object().unwrap_or_else(|| panic!("{response}"));
    assert!(object.contains_key("id"), "{response}");
    let kinds = ["verdict", "error", "unsupported"];
    let n = kinds.iter().filter(|k| object.contains_key(**k)).count();
    assert_eq!(n, 1, "{response}");
    assert!(!response.to_string().contains('\n'), "response spans lines");
}

/// The service's JSON request bodies, through the real router: see `crate::service`.
pub fn service(data: &[u8]) {
    crate::service::one_request(data);
}

/// The MCP interposer's client side (`countersign mcp stdio`, in process): the input is what the
/// client writes, after a `tools/list` that makes `read_file` allowed; `write_file` and every
/// other tool are held, and no approval is ever given. Nothing the upstream is sent may be a
/// `tools/call` of any tool but `read_file` under any of the lenient reader models in
/// `crate::readers` (the Python, TypeScript and Go SDKs' framings, folded and duplicate member
/// names, lone surrogates, huge numbers, deep nesting).
pub fn mcp_relay(data: &[u8]) {
    use countersign_mcp::fuzzing::{ALLOWED_TOOL, relay_client_bytes};
    let sent = relay_client_bytes(data);
    if let Some((tool, text)) = crate::readers::unallowed_call(&sent, ALLOWED_TOOL) {
        panic!("a tools/call of {tool:?} reached the upstream with no approval: {text:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panics(f: impl FnOnce() + std::panic::UnwindSafe) -> bool {
        std::panic::catch_unwind(f).is_err()
    }

    #[test]
    fn the_signature_oracle_bites_on_an_unchanged_signature() {
        // The oracle is not vacuous: the known-good cases, unchanged, are ALLOWed on evidence.
        for good in good_cases() {
            assert!(
                panics(|| assert_not_allowed_on_evidence(&good.case)),
                "{}",
                good.id
            );
        }
    }

    #[test]
    fn rewritten_signatures_are_denied_for_every_algorithm_and_change() {
        for pick in 0..4u8 {
            for how in 0..4u8 {
                rewritten_signature(&[pick, how, 3, 0x80, 0x01]);
                rewritten_signature(&[pick, how]);
            }
        }
    }

    #[test]
    fn a_good_case_runs_every_case_branch() {
        for good in good_cases() {
            let text = serde_json::to_vec(&good_case_json(good.id)).unwrap();
            case(&text);
        }
    }

    fn good_case_json(id: &str) -> serde_json::Value {
        crate::fixtures::evidence_cases(crate::fixtures::EVIDENCE_VECTORS)
            .into_iter()
            .find(|(vid, _)| vid == id)
            .and_then(|(_, bytes)| serde_json::from_slice(&bytes).ok())
            .unwrap()
    }

    #[test]
    fn der_accepts_the_known_signatures_and_their_negated_s() {
        for good in good_cases() {
            der(&good.signature);
        }
    }
}
