//! `audit recheck`: replay every request of a log against a new configuration.
//!
//! For each approval the log records (its request, how it was settled, and the evidence of a
//! human verdict), the new policy is asked what it would do with the same request, and the
//! answer is compared with what happened. The log must first verify (chain and signatures):
//! rechecking an edited log would only measure the edit.
//!
//! The new policy decides in the service's order: a tool rule that needs no human approves; a
//! `[[preauthorizations]]` entry that covers the request (at the request's time; use counts
//! are not replayed) approves; otherwise a human must. Recorded human evidence is then held to
//! the new rule: the approver must be eligible (its groups, plus the group memberships the log's
//! `enrollment` lines record) and the recorded identity assurance must reach `min_assurance`.
//!
//! A resumed call's reference to the approval that allowed it is in the chained record: every
//! `grant` line carries its `approval_id`, so the recheck knows which verdict each executed call
//! relied on.

use crate::config::{ApprovalRule, Config};
use countersign::AssuranceLevel;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// What changes for one approval under the new policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecheckVerdict {
    /// The new policy would reach the same outcome.
    Unchanged,
    /// The new policy refuses the tool (no eligible approver) or the approver who approved.
    NewlyDenied,
    /// Approved without a human before; the new policy requires an approval. Not "blocked": a
    /// human might have approved.
    NewlyParked,
    /// Not approved before (refused, expired, withdrawn, pending, or waiting for a human); the new
    /// policy approves it without a human.
    NewlyAllowed,
    /// The recorded evidence is weaker than the new rule's `min_assurance`.
    InsufficientAssurance,
    /// Fewer distinct approvers than the new policy's quorum.
    QuorumNotMet,
}

impl RecheckVerdict {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unchanged => "unchanged",
            Self::NewlyDenied => "newly_denied",
            Self::NewlyParked => "newly_parked",
            Self::NewlyAllowed => "newly_allowed",
            Self::InsufficientAssurance => "insufficient_assurance",
            Self::QuorumNotMet => "quorum_not_met",
        }
    }
}

/// One approval's recheck.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecheckLine {
    pub approval_id: String,
    pub tool_name: String,
    /// How the log settled it: `APPROVED by decision|tool_rule|preauthorization`, `DENIED
    /// <reason>`, or `PENDING`.
    pub was: String,
    pub verdict: RecheckVerdict,
    /// Why, in words.
    pub detail: String,
    /// Whether a grant was collected on it (a call ran on this approval).
    pub granted: bool,
}

/// What is known about one approval after reading the whole log.
#[derive(Default)]
struct Seen {
    request: Option<Map<String, Value>>,
    status: Option<String>,
    reason: Option<String>,
    by: Option<String>,
    approvers: Vec<(String, Option<AssuranceLevel>)>,
    granted: bool,
}

/// Recheck the (already verified) log `lines` against `config`, one line per approval in the
/// order the requests appear.
pub fn recheck(lines: &[Map<String, Value>], config: &Config) -> Vec<RecheckLine> {
    let mut order: Vec<String> = Vec::new();
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut members: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in lines {
        let kind = line.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "enrollment" {
            let group = line.get("group").and_then(Value::as_str);
            let principal = line.get("principal").and_then(Value::as_str);
            if let (Some(g), Some(p)) = (group, principal) {
                members
                    .entry(g.to_owned())
                    .or_default()
                    .insert(p.to_owned());
            }
            continue;
        }
        let Some(id) = line.get("approval_id").and_then(Value::as_str) else {
            continue;
        };
        let entry = seen.entry(id.to_owned()).or_insert_with(|| {
            order.push(id.to_owned());
            Seen::default()
        });
        let text = |k: &str| line.get(k).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "request" => entry.request = Some(line.clone()),
            "outcome" | "settlement" => {
                entry.status = text("status");
                entry.reason = text("reason_code");
                entry.by = match line.get("preauthorization") {
                    Some(Value::Object(_)) => Some("preauthorization".into()),
                    _ => Some("tool_rule".into()),
                };
            }
            "decision" => {
                entry.status = text("verdict");
                entry.reason = None;
                entry.by = Some("decision".into());
                let level = line
                    .get("identity_assurance")
                    .and_then(|a| a.get("level"))
                    .and_then(|l| serde_json::from_value::<AssuranceLevel>(l.clone()).ok());
                if let Some(p) = text("principal") {
                    entry.approvers.push((p, level));
                }
            }
            "grant" => entry.granted = true,
            _ => {}
        }
    }
    order
        .into_iter()
        .filter_map(|id| {
            let s = seen.remove(&id)?;
            let request = s.request.as_ref()?;
            Some(judge(&id, request, &s, config, &members))
        })
        .collect()
}

/// The new policy's answer for one recorded approval, compared with the recorded one.
fn judge(
    id: &str,
    request: &Map<String, Value>,
    s: &Seen,
    config: &Config,
    members: &BTreeMap<String, BTreeSet<String>>,
) -> RecheckLine {
    let tool = request
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let status = s.status.as_deref().unwrap_or("PENDING");
    let by = s.by.as_deref().unwrap_or("");
    let was = match (status, &s.reason) {
        ("APPROVED", _) => format!("APPROVED by {by}"),
        (other, Some(r)) => format!("{other} {r}"),
        (other, None) => other.to_owned(),
    };
    let (verdict, detail) = new_verdict(tool, request, s, config, members);
    RecheckLine {
        approval_id: id.to_owned(),
        tool_name: tool.to_owned(),
        was,
        verdict,
        detail,
        granted: s.granted,
    }
}

/// What the new policy says of one recorded approval of `tool`, and why.
fn new_verdict(
    tool: &str,
    request: &Map<String, Value>,
    s: &Seen,
    config: &Config,
    members: &BTreeMap<String, BTreeSet<String>>,
) -> (RecheckVerdict, String) {
    let by = s.by.as_deref().unwrap_or("");
    let approved_before = s.status.as_deref() == Some("APPROVED");
    let human_before = approved_before && by == "decision";
    let rule = config.rule(tool);
    let without_human = if rule.approval == ApprovalRule::None {
        Some("its tool rule needs no approval".to_owned())
    } else {
        covering_preauthorization(request, config).map(|slug| format!("preauthorization {slug}"))
    };
    if let Some(how) = without_human {
        return if approved_before {
            (RecheckVerdict::Unchanged, format!("still approved: {how}"))
        } else {
            (
                RecheckVerdict::NewlyAllowed,
                format!("now approved without a human: {how}"),
            )
        };
    }
    // A human is required under the new policy.
    let eligible = eligible(config, members, rule);
    if approved_before && !human_before {
        return (
            RecheckVerdict::NewlyParked,
            format!("was approved by {by}; the new policy asks a human"),
        );
    }
    if !human_before {
        return (
            RecheckVerdict::Unchanged,
            "a human decides, as before".into(),
        );
    }
    human_verdict(tool, s, config, rule, eligible.as_ref())
}

/// A human approved before and the new policy asks one too: whether the recorded approvers are
/// still eligible, assured enough and enough.
fn human_verdict(
    tool: &str,
    s: &Seen,
    config: &Config,
    rule: &crate::config::ToolRule,
    eligible: Option<&BTreeSet<String>>,
) -> (RecheckVerdict, String) {
    if let Some(allowed) = eligible
        && let Some((p, _)) = s.approvers.iter().find(|(p, _)| !allowed.contains(p))
    {
        return (
            RecheckVerdict::NewlyDenied,
            format!("{p} is not an eligible approver of {tool} under the new policy"),
        );
    }
    if let Some(min) = rule.min_assurance
        && let Some((p, level)) = s.approvers.iter().find(|(_, l)| l.is_none_or(|l| l < min))
    {
        let level = level.map_or("unknown".to_owned(), |l| format!("{l:?}"));
        return (
            RecheckVerdict::InsufficientAssurance,
            format!("{p}'s evidence is {level}, below the new minimum {min:?}"),
        );
    }
    let quorum = config.policy(rule, None).quorum;
    let distinct: BTreeSet<&str> = s.approvers.iter().map(|(p, _)| p.as_str()).collect();
    if u32::try_from(distinct.len()).unwrap_or(u32::MAX) < quorum {
        return (
            RecheckVerdict::QuorumNotMet,
            format!("{} approver(s), the new quorum is {quorum}", distinct.len()),
        );
    }
    (
        RecheckVerdict::Unchanged,
        "the recorded verdict still satisfies the new policy".into(),
    )
}

/// The principals the new rule admits (`None`: everyone).
fn eligible(
    config: &Config,
    members: &BTreeMap<String, BTreeSet<String>>,
    rule: &crate::config::ToolRule,
) -> Option<BTreeSet<String>> {
    let configured = config.eligible_principals(rule)?;
    let mut out: BTreeSet<String> = configured.into_iter().map(str::to_owned).collect();
    for group in &rule.approvers {
        if let Some(extra) = members.get(group) {
            out.extend(extra.iter().cloned());
        }
    }
    Some(out)
}

/// The first `[[preauthorizations]]` entry of the new config covering the recorded request at
/// its time, if any.
fn covering_preauthorization(request: &Map<String, Value>, config: &Config) -> Option<String> {
    let agent = request.get("agent_id")?.as_str()?;
    let tool = request.get("tool_name")?.as_str()?;
    let fields = request.get("fields")?;
    let args = if request.get("profile").and_then(Value::as_str)
        == Some(crate::service::DEFAULT_PROFILE)
    {
        fields.get("params")?
    } else {
        fields
    };
    let at = OffsetDateTime::parse(request.get("ts")?.as_str()?, &Rfc3339).ok()?;
    config
        .preauthorizations
        .iter()
        .find(|p| p.scope.covers(agent, tool, args, at).is_ok())
        .map(|p| p.slug.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditEvent, RequestFacts};
    use serde_json::json;

    const TS: &str = "2026-12-01T10:00:00Z";

    fn request(id: &str, tool: &str, amount: &str) -> Map<String, Value> {
        let fields = json!({"agent_id": "agent-7", "tool_name": tool,
                            "params": {"amount": amount, "currency": "EUR"}});
        AuditEvent::request(&RequestFacts {
            approval_id: id,
            ts: TS,
            agent_id: "agent-7",
            tool_name: tool,
            profile: "countersign.tool-call/1",
            fields: &fields,
            submitted_sha256: "00",
            submitted_text: None,
            severity: "normal",
            expires_at: "2026-12-01T10:05:00Z",
            fingerprint: "fp",
        })
        .body()
        .clone()
    }

    fn outcome(id: &str, status: &str, preauth: bool) -> Map<String, Value> {
        let mut e = AuditEvent::outcome(id, TS, status, None);
        if preauth {
            e = e.with_member("preauthorization", json!({"slug": "s"}));
        }
        e.body().clone()
    }

    fn decision(id: &str, verdict: &str, principal: &str, level: &str) -> Map<String, Value> {
        AuditEvent::decision(
            id,
            TS,
            verdict,
            principal,
            &json!({"level": level, "source": "evidence"}),
            &json!({}),
        )
        .body()
        .clone()
    }

    fn config(text: &str) -> Config {
        Config::from_toml(text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn verdicts(lines: &[Map<String, Value>], c: &Config) -> Vec<(String, RecheckVerdict)> {
        recheck(lines, c)
            .into_iter()
            .map(|r| (r.approval_id, r.verdict))
            .collect()
    }

    #[test]
    fn the_same_policy_changes_nothing() {
        let lines = [
            request("a", "pay", "5"),
            outcome("a", "PENDING", false),
            decision("a", "APPROVED", "alice", "AAL2"),
            request("b", "pay", "5"),
            outcome("b", "PENDING", false),
        ];
        let v = verdicts(&lines, &config(""));
        assert_eq!(
            v,
            [
                ("a".into(), RecheckVerdict::Unchanged),
                ("b".into(), RecheckVerdict::Unchanged)
            ]
        );
    }

    #[test]
    fn approvals_without_a_human_are_newly_parked_when_a_human_is_required() {
        let lines = [
            request("p", "pay", "5"),
            outcome("p", "APPROVED", true),
            request("r", "read", "5"),
            outcome("r", "APPROVED", false),
        ];
        let v = verdicts(&lines, &config(""));
        assert_eq!(v[0].1, RecheckVerdict::NewlyParked);
        assert_eq!(v[1].1, RecheckVerdict::NewlyParked);
        // Under a config that still approves `read` without a human, it is unchanged.
        let v = verdicts(
            &lines,
            &config("[[tools]]\nname = \"read\"\napproval = \"none\"\n"),
        );
        assert_eq!(v[1].1, RecheckVerdict::Unchanged);
    }

    #[test]
    fn a_new_preauthorization_newly_allows_what_waited_for_a_human() {
        let lines = [
            request("small", "pay", "5"),
            outcome("small", "PENDING", false),
            request("big", "pay", "500"),
            outcome("big", "PENDING", false),
        ];
        let c = config(
            r#"
            [[preauthorizations]]
            slug = "small"
            agent = "agent-*"
            tool = "pay"
            expires_at = "2027-01-01T00:00:00Z"
            max_uses = 1
            constraints = [{ kind = "max", arg = "/amount", max = "10" }]
            "#,
        );
        let v = verdicts(&lines, &c);
        assert_eq!(v[0].1, RecheckVerdict::NewlyAllowed);
        assert_eq!(v[1].1, RecheckVerdict::Unchanged, "outside the scope");
    }

    #[test]
    fn recorded_evidence_is_held_to_the_new_rule() {
        let lines = [
            request("a", "pay", "5"),
            decision("a", "APPROVED", "alice", "AAL2"),
            request("b", "pay", "5"),
            decision("b", "APPROVED", "bob", "AAL2"),
        ];
        let narrowed = config(
            "[groups]\nfinance = [\"bob\"]\n[[tools]]\nname = \"pay\"\napprovers = [\"finance\"]\n",
        );
        let v = verdicts(&lines, &narrowed);
        assert_eq!(v[0].1, RecheckVerdict::NewlyDenied);
        assert_eq!(v[1].1, RecheckVerdict::Unchanged);
        // A membership granted by an invite (recorded in an enrollment line) counts.
        let mut with_invite = vec![
            AuditEvent::enrollment(
                TS,
                &crate::audit::EnrollmentFacts {
                    principal: "alice",
                    credential_id: "c",
                    aaguid: None,
                    attestation_format: "none",
                    chain_verified: false,
                    group: Some("finance"),
                    source: crate::audit::EnrollmentSource::Invite,
                },
            )
            .body()
            .clone(),
        ];
        with_invite.extend(lines.iter().cloned());
        let v = verdicts(&with_invite, &narrowed);
        assert_eq!(v[0].1, RecheckVerdict::Unchanged);

        let stricter = config("[[tools]]\nname = \"pay\"\nmin_assurance = \"AAL3\"\n");
        let v = verdicts(&lines, &stricter);
        assert_eq!(v[0].1, RecheckVerdict::InsufficientAssurance);
    }
}
