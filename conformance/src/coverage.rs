//! Coverage of the suite: every reason code and every flag has vectors on both sides.
//!
//! A vector *accepts* when it expects ALLOW (evidence) or an op_hash (op_hash kind); it *refuses*
//! otherwise (DENY, an unusable CASE, an op_hash refusal).
//!
//! - A **reason code**'s positive vectors expect that code. Its negative vectors are accepting
//!   vectors that carry one of the flags of its rule ([`CODE_RULES`]): the check ran on a
//!   near-miss input and passed. A code with positives only would let an implementation that
//!   refuses everything for that reason pass; one with negatives only is never pinned.
//! - A **flag**'s positive vectors accept, its negative vectors refuse. Some flags name a defect
//!   (or a legal variation) and can only ever sit on one side: [`ONE_SIDED`] lists each with why
//!   and the flag whose vectors hold the other side, and the check requires that flag to hold it.
//!
//! `countersign-conformance check` and the crate's tests fail on any gap, on an allowlist entry
//! that no longer applies (a one-sided flag that gained its other side) and on a code without a
//! rule; `countersign-conformance report` shows the table.

use crate::vectors::{Kind, Loaded};
use std::collections::{BTreeMap, BTreeSet};

/// Which way a vector goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// ALLOW, or an op_hash.
    Accepts,
    /// DENY, an unusable CASE, or an op_hash refusal.
    Refuses,
}

impl Side {
    /// The side of one vector.
    pub fn of(v: &Loaded) -> Self {
        let e = &v.vector.expected;
        let accepts = match v.kind {
            Kind::Evidence => e.get("effective").and_then(|x| x.as_str()) == Some("ALLOW"),
            Kind::OpHash => e.get("op_hash").is_some(),
        };
        if accepts {
            Self::Accepts
        } else {
            Self::Refuses
        }
    }
}

/// The reason code a vector expects, if any (`reason_code` of a verdict, `error` of an op_hash).
pub fn expected_code(v: &Loaded) -> Option<&str> {
    let e = &v.vector.expected;
    e.get("reason_code")
        .or_else(|| e.get("error"))
        .and_then(|c| c.as_str())
}

/// For each reason code, the flags of the rule that produces it. An accepting vector carrying one
/// of them is a negative vector for the code: the input came close and the check let it through.
pub const CODE_RULES: &[(&str, &[&str])] = &[
    // A call under a standing grant at the edge of its scope: the last use, a constraint's
    // limit, a pattern covering another tool (SPEC §14).
    (
        "out_of_scope",
        &[
            "standing-uses",
            "standing-constraint",
            "standing-scope",
            "standing-calls",
        ],
    ),
    // A call one second before the grant's expiry.
    ("standing_grant_expired", &["standing-expiry"]),
    // An approval with verified evidence carrying the transport's refusal reason: the reason
    // speaks only for a DENIED result without evidence (SPEC §6 step 2).
    ("approver_refused", &["transport-reason"]),
    ("expired_unanswered", &["transport-reason"]),
    ("no_eligible_approver", &["transport-reason"]),
    ("callback_timeout", &["transport-reason"]),
    ("cancelled", &["transport-reason"]),
    // An APPROVED result carrying the members a pending one has (approval_id, expires_at).
    ("pending", &["pending"]),
    (
        "evidence_missing",
        &["no-evidence", "policy-evidence-optional"],
    ),
    (
        "evidence_malformed",
        &[
            "entry-malformed",
            "entry-informational-type",
            "authdata-malformed",
            "flags-at-ed",
            "client-data-malformed",
            "client-data-utf8",
            "signature-encoding",
            "policy-der-strict",
            "flags-be-bs",
        ],
    ),
    // A nested `format` inside a reserved member is not the entry's format.
    ("unsupported_format", &["unsupported-format"]),
    // The registry's second built-in profile resolves as well as the first.
    ("profile_unknown", &["profile-unknown", "tool-call"]),
    (
        "action_inadmissible",
        &[
            "action-inadmissible",
            "profile-fields",
            "canon-nfc-require",
            "operation-binding",
        ],
    ),
    (
        "binding_mismatch",
        &[
            "binding-action",
            "binding-decision",
            "binding-nonce",
            "binding-op-hash",
            "binding-challenge",
            "binding-profile",
            "operation-binding",
            "worked-example",
        ],
    ),
    // The one change to a signature that keeps it valid: S replaced by n - S.
    (
        "signature_invalid",
        &["signature-tamper", "wrong-key", "policy-ecdsa-high-s"],
    ),
    ("rp_mismatch", &["rp-id"]),
    ("origin_mismatch", &["origin", "cross-origin", "top-origin"]),
    ("user_not_present", &["flags-up"]),
    ("user_not_verified", &["flags-uv", "policy-uv-optional"]),
    ("credential_unknown", &["credential-unknown"]),
    ("credential_revoked", &["credential-revoked"]),
    ("approver_ineligible", &["policy-approvers"]),
    (
        "backup_eligibility_mismatch",
        &["backup-eligibility", "flags-be-bs"],
    ),
    (
        "counter_regression",
        &["counter-regression", "counter", "counter-zero"],
    ),
    ("replayed", &["replay"]),
    ("stale", &["freshness"]),
    ("insufficient_assurance", &["min-assurance", "aal3-aaguid"]),
    ("quorum_not_met", &["quorum"]),
    (
        "result_malformed",
        &["result-malformed", "result-duplicate-member"],
    ),
    ("unsupported_algorithm", &["alg-unsupported"]),
];

/// Reason codes that cannot be pinned offline, with why. Empty: the codes a service produces
/// without evidence are pinned as transport reasons (vectors/README.md).
pub const EXEMPT_CODES: &[(&str, &str)] = &[];

/// A flag that can only sit on one side, by what it means.
#[derive(Clone, Copy, Debug)]
pub struct OneSided {
    pub flag: &'static str,
    /// The side its vectors are on.
    pub side: Side,
    /// The flag whose vectors hold the other side of the same rule (checked), if any.
    pub partner: Option<&'static str>,
    /// Why the other side cannot exist under this flag.
    pub why: &'static str,
}

const fn refuses(flag: &'static str, partner: Option<&'static str>, why: &'static str) -> OneSided {
    OneSided {
        flag,
        side: Side::Refuses,
        partner,
        why,
    }
}

const fn accepts(flag: &'static str, partner: Option<&'static str>, why: &'static str) -> OneSided {
    OneSided {
        flag,
        side: Side::Accepts,
        partner,
        why,
    }
}

/// The allowlist of one-sided flags. Every entry names why; an entry whose flag gains its
/// other side is reported as stale, so the list only shrinks by being right.
pub const ONE_SIDED: &[OneSided] = &[
    refuses(
        "signature-tamper",
        Some("policy-ecdsa-high-s"),
        "a signature changed after signing does not verify; the one change that keeps it valid (high S) has its own flag",
    ),
    refuses(
        "authdata-tamper",
        Some("alg-es256"),
        "signed bytes changed after signing never verify; the same vectors untouched are the alg-* approvals",
    ),
    refuses(
        "clientdata-tamper",
        Some("alg-es256"),
        "signed bytes changed after signing never verify; the same vectors untouched are the alg-* approvals",
    ),
    refuses(
        "wrong-key",
        Some("alg-es256"),
        "a signature by another key than the enrolled one never verifies",
    ),
    refuses(
        "signature-encoding",
        Some("alg-eddsa"),
        "a signature of the wrong length is malformed by definition; the right length is every Ed25519 approval",
    ),
    refuses(
        "policy-der-strict",
        Some("alg-es256"),
        "names non-canonical DER, which the strict policy refuses; canonical DER is every ECDSA approval",
    ),
    refuses(
        "binding-challenge",
        Some("worked-example"),
        "a challenge that is not 64 bytes cannot bind; every accepting vector signs a 64-byte challenge",
    ),
    refuses(
        "binding-nonce",
        Some("worked-example"),
        "a nonce beside the signature that differs from the signed one, or of the wrong length, is the defect itself",
    ),
    refuses(
        "binding-op-hash",
        Some("worked-example"),
        "an op_hash beside the signature that differs from the signed one is the defect itself",
    ),
    refuses(
        "binding-decision",
        Some("worked-example"),
        "a decision that differs from the signed one is the defect itself (the worked example signs both ways correctly)",
    ),
    refuses(
        "binding-profile",
        Some("tool-call"),
        "evidence under another profile than the action's never binds; matching profiles are every accepting vector",
    ),
    refuses(
        "status-contradiction",
        Some("worked-example"),
        "a DENIED status over approvals is the contradiction itself",
    ),
    refuses(
        "check-order",
        None,
        "several defects at once: the vector asks which refusal is reported, never whether to refuse",
    ),
    refuses(
        "refusal",
        None,
        "a verified refusal is a DENY (SPEC §6 step 6)",
    ),
    refuses(
        "refusal-veto",
        None,
        "a verified refusal among approvals vetoes them (SPEC §6 step 6)",
    ),
    refuses(
        "challenge",
        Some("client-data-shape"),
        "the challenge has one legal encoding and length, which every accepting vector uses",
    ),
    refuses(
        "client-data-type",
        Some("client-data-shape"),
        "`type` has one legal value, which every accepting vector uses",
    ),
    refuses(
        "client-data-malformed",
        Some("client-data-shape"),
        "names clientDataJSON that does not parse; the legal variations have their own flag",
    ),
    refuses(
        "entry-malformed",
        Some("entry-informational"),
        "names an entry that does not decode; the legal optional members have their own flag",
    ),
    refuses(
        "entry-informational-type",
        Some("entry-informational"),
        "names a mistyped informational member; the well-typed ones have their own flag",
    ),
    refuses(
        "authdata-malformed",
        Some("flags-at-ed"),
        "names authenticator data that does not parse; well-formed attested data and extensions are under flags-at-ed",
    ),
    refuses(
        "backup-eligibility",
        Some("flags-be-bs"),
        "names BE contradicting enrollment; BE agreeing with enrollment is under flags-be-bs",
    ),
    refuses(
        "counter-regression",
        Some("counter"),
        "names a counter that did not increase; increasing counters have their own flag",
    ),
    accepts(
        "counter",
        Some("counter-regression"),
        "names a counter that increased",
    ),
    accepts(
        "counter-zero",
        Some("counter-regression"),
        "names the legal 0-after-0 counter; 0 after a non-zero counter is under counter-regression",
    ),
    refuses(
        "profile-unknown",
        Some("tool-call"),
        "names a profile id outside the registry; both built-in profiles resolve in every accepting vector",
    ),
    refuses(
        "decision-invalid",
        Some("worked-example"),
        "names a decision other than APPROVED/DENIED; the worked example hashes both legal ones",
    ),
    accepts(
        "canon-key-order",
        None,
        "member order never changes op_hash, so it is never a reason to refuse",
    ),
    accepts(
        "canon-utf16-order",
        None,
        "JCS member order is an output rule; no input can violate it",
    ),
    accepts(
        "client-data-shape",
        Some("client-data-malformed"),
        "names legal variations of clientDataJSON",
    ),
    accepts(
        "entry-informational",
        Some("entry-informational-type"),
        "names informational members that do not change the verdict",
    ),
    accepts(
        "policy-ecdsa-high-s",
        Some("policy-der-strict"),
        "names the high-S policy, under which such signatures are accepted",
    ),
    accepts(
        "policy-unicode-18",
        Some("canon-unassigned"),
        "names a code point assigned in Unicode 18.0; code points still unassigned are under canon-unassigned",
    ),
];

/// One row of the coverage table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub positive: usize,
    pub negative: usize,
    /// Why a side may be empty (an allowlist entry), or the rule flags of a code.
    pub note: String,
    /// What is missing, if anything: the check fails on a non-empty gap.
    pub gap: Option<String>,
}

/// The coverage of a set of vectors.
#[derive(Clone, Debug)]
pub struct Coverage {
    /// Every reason code of `ReasonCode::ALL`, in that order.
    pub codes: Vec<Row>,
    /// Every flag used by a vector or documented, in name order.
    pub flags: Vec<Row>,
    /// Problems with the tables themselves (a code without a rule, an unknown flag in a rule).
    pub table_errors: Vec<String>,
}

impl Coverage {
    /// Every gap, one line each; empty when the suite is complete.
    pub fn gaps(&self) -> Vec<String> {
        let mut out = self.table_errors.clone();
        for r in &self.codes {
            if let Some(g) = &r.gap {
                out.push(format!("reason code {}: {g}", r.name));
            }
        }
        for r in &self.flags {
            if let Some(g) = &r.gap {
                out.push(format!("flag {}: {g}", r.name));
            }
        }
        out
    }
}

/// Count both sides of every code and flag. `documented` is the flag registry
/// (`vectors/README.md#flags`).
pub fn measure(vectors: &[Loaded], documented: &BTreeSet<String>) -> Coverage {
    let mut table_errors = Vec::new();
    let mut accepting: BTreeMap<&str, usize> = BTreeMap::new();
    let mut refusing: BTreeMap<&str, usize> = BTreeMap::new();
    for v in vectors {
        let side = Side::of(v);
        for f in &v.vector.flags {
            let m = if side == Side::Accepts {
                &mut accepting
            } else {
                &mut refusing
            };
            *m.entry(f.as_str()).or_insert(0) += 1;
        }
    }
    let count = |m: &BTreeMap<&str, usize>, f: &str| m.get(f).copied().unwrap_or(0);

    let mut codes = Vec::new();
    for code in countersign::ReasonCode::ALL {
        let name = code.as_str();
        let positive = vectors
            .iter()
            .filter(|v| expected_code(v) == Some(name))
            .count();
        let exempt = EXEMPT_CODES.iter().find(|(c, _)| *c == name);
        let Some((_, rule)) = CODE_RULES.iter().find(|(c, _)| *c == name) else {
            table_errors.push(format!(
                "reason code {name} has no entry in coverage::CODE_RULES"
            ));
            continue;
        };
        for f in *rule {
            if !documented.contains(*f) {
                table_errors.push(format!(
                    "coverage::CODE_RULES names flag {f} for {name}, which the registry lacks"
                ));
            }
        }
        let negative = vectors
            .iter()
            .filter(|v| {
                Side::of(v) == Side::Accepts
                    && v.vector.flags.iter().any(|f| rule.contains(&f.as_str()))
            })
            .count();
        let gap = match (exempt, positive, negative) {
            (Some(_), _, _) => None,
            (None, 0, 0) => Some("no vector expects it and no accepting vector of its rule".into()),
            (None, 0, _) => Some("no vector expects it".into()),
            (None, _, 0) => Some(format!(
                "no accepting vector carries a flag of its rule ({})",
                rule.join(", ")
            )),
            _ => None,
        };
        let note = match exempt {
            Some((_, why)) => format!("exempt: {why}"),
            None => rule
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        codes.push(Row {
            name: name.to_owned(),
            positive,
            negative,
            note,
            gap,
        });
    }
    for (c, _) in CODE_RULES {
        if countersign::ReasonCode::from_wire(c).is_none() {
            table_errors.push(format!(
                "coverage::CODE_RULES names {c}, which is not a reason code"
            ));
        }
    }

    let mut names: BTreeSet<&str> = documented.iter().map(String::as_str).collect();
    names.extend(accepting.keys().copied());
    names.extend(refusing.keys().copied());
    let mut flags = Vec::new();
    for name in names {
        let (positive, negative) = (count(&accepting, name), count(&refusing, name));
        let one_sided = ONE_SIDED.iter().find(|o| o.flag == name);
        let gap = match one_sided {
            None => match (positive, negative) {
                (0, _) => Some("no accepting vector".to_owned()),
                (_, 0) => Some("no refusing vector".to_owned()),
                _ => None,
            },
            Some(o) => {
                let (held, other) = match o.side {
                    Side::Accepts => (positive, negative),
                    Side::Refuses => (negative, positive),
                };
                let partner_other = o.partner.map(|p| match o.side {
                    Side::Accepts => count(&refusing, p),
                    Side::Refuses => count(&accepting, p),
                });
                if other > 0 {
                    Some("has both sides now: remove it from coverage::ONE_SIDED".to_owned())
                } else if held == 0 {
                    Some(format!(
                        "allowlisted as one-sided but has no {:?} vector",
                        o.side
                    ))
                } else if partner_other == Some(0) {
                    Some(format!(
                        "its partner flag {} does not hold the other side",
                        o.partner.unwrap_or_default()
                    ))
                } else {
                    None
                }
            }
        };
        let note = match one_sided {
            Some(o) => match o.partner {
                Some(p) => format!("one-sided: {} (other side: `{p}`)", o.why),
                None => format!("one-sided: {}", o.why),
            },
            None => String::new(),
        };
        flags.push(Row {
            name: name.to_owned(),
            positive,
            negative,
            note,
            gap,
        });
    }
    for o in ONE_SIDED {
        if !documented.contains(o.flag) {
            table_errors.push(format!(
                "coverage::ONE_SIDED names flag {}, which the registry lacks",
                o.flag
            ));
        }
    }
    Coverage {
        codes,
        flags,
        table_errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::{Input, Vector};
    use serde_json::{Value, json};

    fn v(kind: Kind, flags: &[&str], expected: Value) -> Loaded {
        Loaded {
            kind,
            vector: Vector {
                id: "t::v".into(),
                description: String::new(),
                flags: flags.iter().map(|f| (*f).to_owned()).collect(),
                input: Input::Json(Value::Null),
                expected,
            },
        }
    }

    fn allow() -> Value {
        json!({"effective": "ALLOW", "decision": "APPROVED", "reason_code": null, "identity_assurance_level": "AAL2"})
    }

    fn deny(code: &str) -> Value {
        json!({"effective": "DENY", "decision": "APPROVED", "reason_code": code, "identity_assurance_level": "declared"})
    }

    fn flag<'a>(c: &'a Coverage, name: &str) -> &'a Row {
        c.flags
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no row for {name}"))
    }

    fn code<'a>(c: &'a Coverage, name: &str) -> &'a Row {
        c.codes
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no row for {name}"))
    }

    fn registry(flags: &[&str]) -> BTreeSet<String> {
        flags.iter().map(|f| (*f).to_owned()).collect()
    }

    #[test]
    fn sides_of_each_kind() {
        assert_eq!(Side::of(&v(Kind::Evidence, &[], allow())), Side::Accepts);
        assert_eq!(
            Side::of(&v(Kind::Evidence, &[], deny("stale"))),
            Side::Refuses
        );
        assert_eq!(
            Side::of(&v(Kind::Evidence, &[], json!({"unusable_case": "policy"}))),
            Side::Refuses
        );
        assert_eq!(
            Side::of(&v(Kind::OpHash, &[], json!({"op_hash": "x"}))),
            Side::Accepts
        );
        assert_eq!(
            Side::of(&v(
                Kind::OpHash,
                &[],
                json!({"error": "action_inadmissible"})
            )),
            Side::Refuses
        );
    }

    #[test]
    fn a_flag_with_both_sides_has_no_gap_and_one_side_is_a_gap() {
        let reg = registry(&["freshness", "quorum"]);
        let vs = [
            v(Kind::Evidence, &["freshness"], allow()),
            v(Kind::Evidence, &["freshness", "quorum"], deny("stale")),
        ];
        let c = measure(&vs, &reg);
        assert_eq!(flag(&c, "freshness").gap, None);
        assert_eq!(
            (
                flag(&c, "freshness").positive,
                flag(&c, "freshness").negative
            ),
            (1, 1)
        );
        assert_eq!(
            flag(&c, "quorum").gap.as_deref(),
            Some("no accepting vector")
        );
    }

    #[test]
    fn a_code_needs_an_expecting_vector_and_an_accepting_vector_of_its_rule() {
        let reg = registry(&["freshness", "quorum"]);
        // stale: expected once; the accepting vector carries `quorum`, not `freshness`.
        let vs = [
            v(Kind::Evidence, &["freshness"], deny("stale")),
            v(Kind::Evidence, &["quorum"], allow()),
        ];
        let c = measure(&vs, &reg);
        let stale = code(&c, "stale");
        assert_eq!((stale.positive, stale.negative), (1, 0));
        assert!(
            stale
                .gap
                .as_deref()
                .is_some_and(|g| g.contains("freshness"))
        );
        let vs = [
            v(Kind::Evidence, &["freshness"], deny("stale")),
            v(Kind::Evidence, &["freshness"], allow()),
        ];
        assert_eq!(code(&measure(&vs, &reg), "stale").gap, None);
        // quorum_not_met: never expected.
        assert_eq!(
            code(&measure(&vs, &reg), "quorum_not_met").gap.as_deref(),
            Some("no vector expects it and no accepting vector of its rule")
        );
    }

    #[test]
    fn an_allowlisted_flag_needs_its_side_and_its_partner_and_goes_stale() {
        let reg = registry(&["counter", "counter-regression"]);
        let regression = v(
            Kind::Evidence,
            &["counter-regression"],
            deny("counter_regression"),
        );
        let increase = v(Kind::Evidence, &["counter"], allow());
        // Both present: counter-regression refuses, its partner counter accepts.
        let c = measure(&[regression.clone(), increase.clone()], &reg);
        assert_eq!(flag(&c, "counter-regression").gap, None);
        assert_eq!(flag(&c, "counter").gap, None);
        // Partner missing its side.
        let c = measure(std::slice::from_ref(&regression), &reg);
        assert!(
            flag(&c, "counter-regression")
                .gap
                .as_deref()
                .is_some_and(|g| g.contains("partner"))
        );
        // The allowlisted flag gains the other side: stale entry.
        let both = v(Kind::Evidence, &["counter-regression"], allow());
        let c = measure(&[regression, increase, both], &reg);
        assert!(
            flag(&c, "counter-regression")
                .gap
                .as_deref()
                .is_some_and(|g| g.contains("remove it"))
        );
    }

    #[test]
    fn every_code_has_a_rule_and_rules_name_real_codes() {
        for code in countersign::ReasonCode::ALL {
            assert!(
                CODE_RULES.iter().any(|(c, _)| *c == code.as_str()),
                "{code} has no rule"
            );
        }
        for (c, _) in CODE_RULES {
            assert!(countersign::ReasonCode::from_wire(c).is_some(), "{c}");
        }
    }
}
