//! The interposer's own approver rules (`[groups]`, `[default_tool]`, `[[tools]]`): the evidence
//! of a held call is verified under the rule of its tool, whatever the service decided. The
//! service here is permissive (no groups: any enrolled principal may decide any tool), so it
//! settles APPROVED whatever the interposer's rules say, as a lying service would.

use crate::support::{
    Approver, Client, Service, Upstream, approval_id, base_config, plain_client, service,
    start_interposer, task_call, task_end, task_id, tasks_client, temp, ticket,
};
use countersign::{ApprovalStatus, CredentialRecord, Decision, ReasonCode};
use countersign_client::{Gateway, GatewayConfig, GatewayToken, ReplayStore, ToolCall};
use countersign_mcp::{Config, Interposer};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// The approvers of these tests, enrolled at the service and in the interposer's registry.
struct People {
    alice: Approver,
    bob: Approver,
    mallory: Approver,
}

impl People {
    fn new() -> Self {
        Self {
            alice: Approver::new("alice", "alice-es256"),
            bob: Approver::new("bob", "bob-es256"),
            mallory: Approver::new("mallory", "mallory-es256"),
        }
    }
    fn records(&self) -> Vec<CredentialRecord> {
        [&self.alice, &self.bob, &self.mallory]
            .iter()
            .map(|a| a.record())
            .collect()
    }
}

/// The tests' interposer configuration with `rules` (TOML) added, trusting `registry`.
fn config_with(name: &str, registry: &[CredentialRecord], rules: &str) -> Config {
    let base = base_config(&temp(name), registry);
    let mut config = Config::from_toml(&format!(
        "rp_id = \"{RP_ID}\"\norigins = [\"{ORIGIN}\"]\nallow = [\"read_*\"]\npark_seconds = 2\n{rules}"
    ))
    .unwrap();
    config.registry = base.registry;
    config.audit_log = base.audit_log;
    config
}

/// A permissive service, the interposer under `rules`, and a client that has listed the tools.
async fn rig(name: &str, rules: &str, init: Value) -> (People, Service, Arc<Upstream>, Client) {
    let (people, svc, upstream, client, _interposer) = rig_with_interposer(name, rules, init).await;
    (people, svc, upstream, client)
}

async fn rig_with_interposer(
    name: &str,
    rules: &str,
    init: Value,
) -> (People, Service, Arc<Upstream>, Client, Arc<Interposer>) {
    let people = People::new();
    let svc = service(&people.records()).await;
    let config = config_with(name, &people.records(), rules);
    let upstream = Arc::new(Upstream::default());
    let (mut client, interposer, _run) = start_interposer(&svc, config, upstream.clone()).await;
    client.request("initialize", init).await;
    client.request("tools/list", json!({})).await;
    (people, svc, upstream, client, interposer)
}

fn text(r: &Value) -> &str {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// Hold `tool`, have `who` approve it at the service, retry: the retry's answer.
async fn approved_by(
    who: &Approver,
    svc: &Service,
    client: &mut Client,
    tool: &str,
    args: &str,
) -> Value {
    let held = client.call_raw(tool, args).await;
    assert_eq!(ticket(&held)["status"], "PENDING", "{held}");
    let id = approval_id(&held);
    who.decide(svc, &id, Decision::Approved).await;
    client.call_raw(tool, args).await
}

const WRITERS_ONLY: &str = "[groups]\nwriters = [\"alice\"]\n\
    [[tools]]\nname = \"write_file\"\napprovers = [\"writers\"]\n";

#[tokio::test]
async fn an_enrolled_principal_outside_the_tools_approvers_releases_nothing() {
    let (people, svc, upstream, mut client) = rig("ineligible", WRITERS_ONLY, plain_client()).await;
    let r = approved_by(
        &people.mallory,
        &svc,
        &mut client,
        "write_file",
        r#"{"path":"/m"}"#,
    )
    .await;
    assert!(
        text(&r).starts_with("Not run: refused (approver_ineligible)"),
        "{r}"
    );
    assert_eq!(ticket(&r)["status"], "DENIED");
    assert!(
        upstream.calls_of("write_file").is_empty(),
        "the tool never ran"
    );
}

#[tokio::test]
async fn the_rule_in_force_at_release_decides_not_the_one_at_hold() {
    let (people, svc, upstream, mut client, interposer) =
        rig_with_interposer("rule-now", WRITERS_ONLY, plain_client()).await;
    let args = r#"{"path":"/n"}"#;
    let held = client.call_raw("write_file", args).await;
    let id = approval_id(&held);
    people.alice.decide(&svc, &id, Decision::Approved).await;
    // Between the verdict and the retry the operator moves write_file to bob.
    let records = people.records();
    interposer.set_config(config_with(
        "rule-now-2",
        &records,
        "[groups]\nwriters = [\"bob\"]\n[[tools]]\nname = \"write_file\"\napprovers = [\"writers\"]\n",
    ));
    let r = client.call_raw("write_file", args).await;
    assert!(
        text(&r).starts_with("Not run: refused (approver_ineligible)"),
        "{r}"
    );
    assert!(upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn a_task_approved_by_an_ineligible_principal_fails_and_nothing_runs() {
    let (people, svc, upstream, mut client) =
        rig("ineligible-task", WRITERS_ONLY, tasks_client()).await;
    let created = task_call(&mut client, r#"{"path":"/mt"}"#).await;
    people
        .mallory
        .decide(&svc, &approval_id(&created), Decision::Approved)
        .await;
    let ended = task_end(&mut client, &task_id(&created)).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let message = ended["statusMessage"].as_str().unwrap();
    assert!(
        message.starts_with("Not run: refused (approver_ineligible)"),
        "{message}"
    );
    assert!(upstream.calls_of("write_file").is_empty());
}

/// `write_file` has its own rule (alice, AAL2 at least); every other held tool falls to the
/// default (bob only).
const OWN_AND_DEFAULT: &str = "[groups]\nwriters = [\"alice\"]\nadmins = [\"bob\"]\n\
    [default_tool]\napprovers = [\"admins\"]\n\
    [[tools]]\nname = \"write_file\"\napprovers = [\"writers\"]\nmin_assurance = \"AAL2\"\n";

#[tokio::test]
async fn each_held_tool_is_verified_under_its_own_rule_or_the_default() {
    let (people, svc, upstream, mut client) =
        rig("own-rule", OWN_AND_DEFAULT, plain_client()).await;
    // Alice is write_file's approver, at AAL2 (a user-verified key without attestation).
    let r = approved_by(&people.alice, &svc, &mut client, "write_file", r#"{"p":1}"#).await;
    assert_eq!(text(&r), "ran \"write_file\"", "{r}");
    assert_eq!(upstream.calls_of("write_file").len(), 1);
    // move_file (held: not in the list) has no rule of its own: the default's bob, not alice.
    let r = approved_by(&people.alice, &svc, &mut client, "move_file", r#"{"p":2}"#).await;
    assert!(
        text(&r).starts_with("Not run: refused (approver_ineligible)"),
        "{r}"
    );
    assert!(upstream.calls_of("move_file").is_empty());
    let r = approved_by(&people.bob, &svc, &mut client, "move_file", r#"{"p":2}"#).await;
    assert_eq!(text(&r), "ran \"move_file\"", "{r}");
    assert_eq!(upstream.calls_of("move_file").len(), 1);
}

#[tokio::test]
async fn an_approval_below_the_rules_min_assurance_is_refused() {
    let rules = "[default_tool]\nmin_assurance = \"AAL3\"\n";
    let (people, svc, upstream, mut client) = rig("assurance", rules, plain_client()).await;
    // Alice's key is user-verified but not attested: AAL2.
    let r = approved_by(&people.alice, &svc, &mut client, "write_file", r#"{"a":3}"#).await;
    assert!(
        text(&r).starts_with("Not run: refused (insufficient_assurance)"),
        "{r}"
    );
    assert!(upstream.calls_of("write_file").is_empty());
}

#[tokio::test]
async fn one_approval_does_not_meet_a_quorum_of_two() {
    let rules = "[groups]\npair = [\"alice\", \"bob\"]\n\
        [[tools]]\nname = \"write_file\"\napprovers = [\"pair\"]\nquorum = 2\n";
    let (people, svc, upstream, mut client) = rig("quorum", rules, plain_client()).await;
    // The service settles on the first verdict: one approver's evidence.
    let r = approved_by(&people.alice, &svc, &mut client, "write_file", r#"{"q":2}"#).await;
    assert!(
        text(&r).starts_with("Not run: refused (quorum_not_met)"),
        "{r}"
    );
    assert!(upstream.calls_of("write_file").is_empty());
}

/// The verification the relay runs, with results only a lying service would send: evidence
/// from several principals, made by the software authenticator over the exact call.
#[test]
fn the_tools_quorum_counts_distinct_eligible_approvers() {
    use countersign_testkit::{NOW, Signing, evidence, result};
    let people = People::new();
    let config = config_with(
        "quorum-gateway",
        &people.records(),
        "[groups]\npair = [\"alice\", \"bob\"]\n\
         [[tools]]\nname = \"write_file\"\napprovers = [\"pair\"]\nquorum = 2\n",
    );
    let registry = countersign::CredentialRegistry::from_json(
        &std::fs::read(config.registry.as_ref().unwrap()).unwrap(),
    )
    .unwrap();
    let call = ToolCall::mcp("agent-7", "filesystem", "write_file", r#"{"q":2}"#);
    let action = call.action();
    let now =
        time::OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).unwrap();
    let verify = |signers: &[&Approver]| {
        // A fresh replay store each time: each row is judged on its own.
        let gateway = Gateway::new(
            GatewayConfig::new(
                "http://127.0.0.1:9".parse().unwrap(),
                GatewayToken::new("t").unwrap(),
                Duration::from_secs(1),
            ),
            countersign::Policy::new(RP_ID, [ORIGIN]),
            registry.clone(),
            ReplayStore::memory(),
        )
        .with_clock(move || now);
        let entries = signers.iter().enumerate().map(|(n, who)| {
            evidence(
                &who.key,
                &action,
                &Signing::new(Decision::Approved, &format!("quorum-{n}")),
            )
        });
        let approvers = config.approver_policy("write_file");
        gateway
            .verify_result_under(&call, result(ApprovalStatus::Approved, entries), &approvers)
            .map(|_| ())
            .map_err(|r| r.reason_code)
    };
    assert_eq!(verify(&[&people.alice, &people.bob]), Ok(()));
    assert_eq!(verify(&[&people.alice]), Err(ReasonCode::QuorumNotMet));
    assert_eq!(
        verify(&[&people.alice, &people.alice]),
        Err(ReasonCode::QuorumNotMet),
        "one principal twice is one approver"
    );
    assert_eq!(
        verify(&[&people.alice, &people.mallory]),
        Err(ReasonCode::ApproverIneligible),
        "mallory is enrolled but not in the pair"
    );
}

/// What `Config::from_toml` says about `rules`, or "" if it takes them.
fn refusal(rules: &str) -> String {
    Config::from_toml(rules)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

#[test]
fn approver_rules_that_contradict_themselves_are_refused_naming_the_problem() {
    let cases: &[(&str, &[&str])] = &[
        (
            "[[tools]]\nname = \"write_file\"\napprovers = [\"ghosts\"]",
            &["tool \"write_file\"", "group \"ghosts\"", "not defined"],
        ),
        (
            "[default_tool]\napprovers = [\"ghosts\"]",
            &["[default_tool]", "\"ghosts\""],
        ),
        (
            "[groups]\npair = [\"alice\", \"bob\"]\n\
             [[tools]]\nname = \"pay\"\napprovers = [\"pair\"]\nquorum = 3",
            &["tool \"pay\"", "quorum 3", "2 principal(s)"],
        ),
        (
            "[groups]\nnobody = []\n[[tools]]\nname = \"pay\"\napprovers = [\"nobody\"]",
            &["tool \"pay\"", "no members"],
        ),
        (
            "[[tools]]\nname = \"pay\"\nquorum = 0",
            &["tool \"pay\"", "at least 1"],
        ),
        (
            "allow = [\"write_*\"]\n[groups]\nw = [\"alice\"]\n\
             [[tools]]\nname = \"write_file\"\napprovers = [\"w\"]",
            &["tool \"write_file\"", "allow pattern \"write_*\""],
        ),
        (
            "[[tools]]\nname = \"pay\"\nmin_assurance = \"AAL4\"",
            &["min_assurance", "AAL4"],
        ),
        (
            "[[tools]]\nname = \"pay\"\n[[tools]]\nname = \"pay\"",
            &["\"pay\" appears twice"],
        ),
        ("[[tools]]\napprovers = []", &["has no name"]),
        (
            "[default_tool]\nname = \"pay\"",
            &["[default_tool] has name"],
        ),
        // The service's words for what the interposer decides elsewhere are not rule members.
        (
            "[[tools]]\nname = \"pay\"\napproval = \"none\"",
            &["unknown field", "approval"],
        ),
    ];
    for (rules, words) in cases {
        let message = refusal(rules);
        for word in *words {
            assert!(
                message.contains(word),
                "{rules:?}: {message:?} lacks {word:?}"
            );
        }
    }
    // Held despite the allow pattern: the rule is consulted, so it is no contradiction.
    assert_eq!(
        refusal(
            "allow = [\"write_*\"]\nhold = [\"write_file\"]\n\
             [[tools]]\nname = \"write_file\"\nmin_assurance = \"AAL2\""
        ),
        ""
    );
}

#[tokio::test]
async fn a_quorum_the_trusted_registry_cannot_meet_refuses_the_start() {
    let people = People::new();
    let rules = "[default_tool]\nquorum = 2\n";
    let start = |registry: Vec<CredentialRecord>| {
        let config = config_with("enrolled", &registry, rules);
        // No service is asked: the registry is a file, and the check comes first.
        countersign_mcp::interposer(
            "http://127.0.0.1:9".parse().unwrap(),
            GatewayToken::new("t").unwrap(),
            "agent-7".into(),
            "filesystem".into(),
            config,
        )
    };
    let refused = start(vec![people.alice.record()]).await.err().unwrap();
    let message = format!("{refused:#}");
    assert!(
        message.contains("[default_tool]") && message.contains("quorum 2"),
        "{message}"
    );
    // Two eligible principals enrolled: it starts.
    assert!(
        start(vec![people.alice.record(), people.bob.record()])
            .await
            .is_ok()
    );
}

/// The first TOML block of `section` in docs/MCP.md.
fn documented_toml(section: &str) -> String {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/MCP.md"),
    )
    .unwrap();
    let from = doc.find(&format!("\n## {section}\n")).unwrap();
    let block = &doc[from..];
    let start = block.find("```toml\n").unwrap() + "```toml\n".len();
    let end = start + block[start..].find("```").unwrap();
    block[start..end].to_owned()
}

#[test]
fn the_documented_rules_are_read_as_documented() {
    let rules = Config::from_toml(&documented_toml("Who may approve")).unwrap();
    let pay = rules.approver_policy("payments.transfer");
    assert_eq!(pay.approvers, Some(vec!["alice".into(), "bob".into()]));
    assert_eq!(pay.quorum, 2);
    assert_eq!(pay.min_assurance, Some(countersign::AssuranceLevel::Aal3));
    assert_eq!(
        rules.approver_policy("anything_else").approvers,
        Some(vec!["carol".into()])
    );
    let reference = Config::from_toml(&documented_toml("Configuration reference")).unwrap();
    assert_eq!(
        reference.approver_policy("move_file").approvers,
        Some(vec!["alice".into(), "bob".into()])
    );
    assert_eq!(reference.held_as, countersign_mcp::HeldAs::ToolError);
}
