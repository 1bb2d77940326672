use super::*;
use proptest::prelude::*;
use serde_json::json;
use time::macros::datetime;

const BEFORE: OffsetDateTime = datetime!(2026-12-03 12:00 UTC);

fn scope(constraints: Value) -> Scope {
    Scope::from_value(json!({
        "agent": "agent-*",
        "tool": "payments.transfer",
        "constraints": constraints,
        "expires_at": "2026-12-31T00:00:00Z",
        "max_uses": 5,
    }))
    .unwrap_or_else(|e| panic!("test scope refused: {e}"))
}

fn covers(s: &Scope, args: Value) -> Result<(), OutOfScope> {
    s.covers("agent-7", "payments.transfer", &args, BEFORE)
}

fn refused(doc: Value) -> ScopeError {
    match Scope::from_value(doc) {
        Ok(s) => panic!("accepted {s:?}"),
        Err(e) => e,
    }
}

fn base_with(key: &str, value: Value) -> Value {
    let mut doc = json!({
        "agent": "*", "tool": "*", "expires_at": "2026-12-31T00:00:00Z", "max_uses": 1
    });
    doc[key] = value;
    doc
}

// --- patterns -------------------------------------------------------------------------------

#[test]
fn patterns_match_literally_with_star_wildcards() {
    let p = |s: &str| Pattern::new(s).unwrap_or_else(|e| panic!("{e}"));
    assert!(p("*").matches(""));
    assert!(p("*").matches("anything/at.all"));
    assert!(p("payments.*").matches("payments.transfer"));
    assert!(p("payments.*").matches("payments."));
    assert!(!p("payments.*").matches("payments"));
    assert!(!p("payments.*").matches("xpayments.transfer"));
    assert!(p("*.read").matches("files.read"));
    assert!(!p("*.read").matches("files.read.all"));
    assert!(p("a*b*c").matches("aXXbYYc"));
    assert!(p("a*b*c").matches("abbbc"));
    assert!(!p("a*b*c").matches("aXXcYYb"));
    assert!(p("exact").matches("exact"));
    assert!(!p("exact").matches("Exact"), "case-sensitive");
    assert!(!p("exact").matches("exactly"));
    assert!(p("é*").matches("été"), "characters, not bytes");
}

#[test]
fn patterns_refuse_empty_long_and_control_text() {
    assert_eq!(Pattern::new(""), Err(ScopeError::EmptyPattern));
    assert!(matches!(
        Pattern::new(&"a".repeat(257)),
        Err(ScopeError::PatternTooLong { got: 257, .. })
    ));
    assert!(Pattern::new(&"a".repeat(256)).is_ok());
    assert!(matches!(
        Pattern::new("tool\n*"),
        Err(ScopeError::PatternControlChar {
            code_point: 0x0A,
            ..
        })
    ));
}

#[test]
fn agent_and_tool_outside_the_patterns_are_named() {
    let s = scope(json!([]));
    assert_eq!(covers(&s, json!({})), Ok(()));
    let err = s.covers("bot-1", "payments.transfer", &json!({}), BEFORE);
    assert!(matches!(err, Err(OutOfScope::AgentNotCovered { ref agent, .. }) if agent == "bot-1"));
    let err = s.covers("agent-7", "payments.refund", &json!({}), BEFORE);
    assert_eq!(err.map_err(|e| e.code()), Err("tool_not_covered"));
}

// --- one_of ---------------------------------------------------------------------------------

#[test]
fn one_of_matches_listed_values_exactly() {
    let s = scope(json!([{"kind": "one_of", "arg": "/to", "values": ["DE89", 7, {"a": [1]}]}]));
    assert_eq!(covers(&s, json!({"to": "DE89"})), Ok(()));
    assert_eq!(covers(&s, json!({"to": 7})), Ok(()));
    assert_eq!(covers(&s, json!({"to": {"a": [1]}})), Ok(()));
    let err = covers(&s, json!({"to": "7"})).unwrap_err();
    assert_eq!(err.code(), "value_not_allowed");
    assert_eq!(err.arg(), Some("/to"));
    assert!(covers(&s, json!({"to": "DE89 "})).is_err());
    assert!(covers(&s, json!({"to": null})).is_err());
}

#[test]
fn absence_never_matches_even_when_null_is_allowed() {
    let s = scope(json!([{"kind": "one_of", "arg": "/memo", "values": [null, "x"]}]));
    assert_eq!(
        covers(&s, json!({"memo": null})),
        Ok(()),
        "explicit null is allowed"
    );
    assert_eq!(
        covers(&s, json!({})),
        Err(OutOfScope::ArgumentMissing {
            rule: 0,
            kind: "one_of",
            arg: "/memo".into()
        })
    );
    // Nested: a missing parent is absence too.
    let s = scope(json!([{"kind": "one_of", "arg": "/to/iban", "values": [null]}]));
    assert_eq!(covers(&s, json!({"to": {"iban": null}})), Ok(()));
    assert_eq!(
        covers(&s, json!({"to": {}})).map_err(|e| e.code()),
        Err("argument_missing")
    );
    assert_eq!(
        covers(&s, json!({"to": null})).map_err(|e| e.code()),
        Err("argument_missing")
    );
}

#[test]
fn null_matches_only_when_allowed() {
    let s = scope(json!([{"kind": "one_of", "arg": "/memo", "values": ["x"]}]));
    assert_eq!(
        covers(&s, json!({"memo": null})).map_err(|e| e.code()),
        Err("value_not_allowed")
    );
}

#[test]
fn one_of_refuses_empty_and_float_allowlists() {
    let doc = base_with(
        "constraints",
        json!([{"kind": "one_of", "arg": "/a", "values": []}]),
    );
    assert!(matches!(refused(doc), ScopeError::Syntax(m) if m.contains("empty allowlist")));
    let doc = base_with(
        "constraints",
        json!([{"kind": "one_of", "arg": "/a", "values": [1.5]}]),
    );
    assert!(matches!(refused(doc), ScopeError::Syntax(m) if m.contains("float")));
    let doc = base_with(
        "constraints",
        json!([{"kind": "one_of", "arg": "/a", "values": [[9007199254740992u64]]}]),
    );
    assert!(matches!(refused(doc), ScopeError::Syntax(_)));
}

// --- prefix ---------------------------------------------------------------------------------

#[test]
fn prefix_requires_a_string_starting_with_the_prefix() {
    let s = scope(json!([{"kind": "prefix", "arg": "/to", "prefix": "ops-"}]));
    assert_eq!(covers(&s, json!({"to": "ops-landlord"})), Ok(()));
    assert_eq!(
        covers(&s, json!({"to": "opsX-landlord"})).map_err(|e| e.code()),
        Err("prefix_mismatch")
    );
    assert_eq!(
        covers(&s, json!({"to": 3})).map_err(|e| e.code()),
        Err("not_a_string")
    );
    assert_eq!(
        covers(&s, json!({"to": null})).map_err(|e| e.code()),
        Err("not_a_string")
    );
    assert_eq!(
        covers(&s, json!({})).map_err(|e| e.code()),
        Err("argument_missing")
    );
}

#[test]
fn prefix_holding_a_separator_is_refused_at_parse() {
    // A string prefix on a path admits `..` and sibling names: the rule for paths is `path`.
    for prefix in [
        "/srv/data/",
        "/srv/data",
        "refs/heads/",
        "C:\\data\\",
        "https://x/",
    ] {
        let doc = base_with(
            "constraints",
            json!([{"kind": "prefix", "arg": "/path", "prefix": prefix}]),
        );
        assert!(
            matches!(refused(doc), ScopeError::Syntax(m) if m.contains("contains '/' or '\\'")),
            "{prefix}"
        );
    }
    assert_eq!(
        PrefixText::try_from("/srv/data/".to_owned()),
        Err(ScopeError::SeparatorInPrefix {
            prefix: "/srv/data/".into()
        })
    );
    assert!(PrefixText::try_from("ops-".to_owned()).is_ok());
}

// --- path -----------------------------------------------------------------------------------

fn path_scope(under: &str) -> Scope {
    scope(json!([{"kind": "path", "arg": "/file", "under": under}]))
}

#[test]
fn path_admits_the_directory_and_what_is_inside_it() {
    let s = path_scope("/srv/data");
    for ok in [
        "/srv/data",
        "/srv/data/",
        "/srv/data/q3/report.pdf",
        "/srv//data/./q3//report.pdf",
        "/srv/data/...",
    ] {
        assert_eq!(covers(&s, json!({ "file": ok })), Ok(()), "{ok}");
    }
    assert_eq!(
        covers(&path_scope("/"), json!({"file": "/etc/hosts"})),
        Ok(())
    );
}

#[test]
fn path_refuses_traversal_siblings_and_ambiguous_spellings() {
    let s = path_scope("/srv/data");
    assert_eq!(
        covers(&s, json!({"file": "/srv/data/../../etc/shadow"})),
        Err(OutOfScope::PathRefused {
            rule: 0,
            arg: "/file".into(),
            got: "/srv/data/../../etc/shadow".into(),
            why: PathRefusal::ParentName,
        })
    );
    assert_eq!(
        covers(&s, json!({"file": "/srv/data2/x"})),
        Err(OutOfScope::PathOutside {
            rule: 0,
            arg: "/file".into(),
            under: "/srv/data".into(),
            got: "/srv/data2/x".into(),
        })
    );
    for (got, code) in [
        ("/srv/data/a/../b", "path_refused"),
        ("/srv/data\\..\\..\\etc\\shadow", "path_refused"),
        ("/srv/data/%2e%2e/%2e%2e/etc/shadow", "path_refused"),
        ("/srv/data/x\u{0}.pdf", "path_refused"),
        ("srv/data/x", "path_refused"),
        ("//srv/data/x", "path_refused"),
        ("/srv/dat", "path_outside"),
        ("/srv", "path_outside"),
        ("/etc/shadow", "path_outside"),
        ("/SRV/data/x", "path_outside"),
    ] {
        assert_eq!(
            covers(&s, json!({ "file": got })).map_err(|e| e.code()),
            Err(code),
            "{got:?}"
        );
    }
    assert_eq!(
        covers(&s, json!({"file": ["/srv/data/x"]})).map_err(|e| e.code()),
        Err("not_a_string")
    );
    assert_eq!(
        covers(&s, json!({})).map_err(|e| e.code()),
        Err("argument_missing")
    );
}

#[test]
fn path_directory_must_be_absolute_and_normal() {
    for (under, needle) in [
        ("/srv/data/", "write \"/srv/data\""),
        ("/srv//data", "write \"/srv/data\""),
        ("/srv/./data", "write \"/srv/data\""),
        ("/srv/data/..", "'..'"),
        ("srv/data", "not absolute"),
        ("", "not absolute"),
        ("/srv/data%2f", "'%'"),
        ("C:\\data", "'\\'"),
    ] {
        let doc = base_with(
            "constraints",
            json!([{"kind": "path", "arg": "/file", "under": under}]),
        );
        assert!(
            matches!(refused(doc), ScopeError::Syntax(ref m) if m.contains(needle)),
            "{under:?}"
        );
    }
    let s = path_scope("/srv/data");
    let json = serde_json::to_value(&s).unwrap_or_default();
    assert_eq!(
        json["constraints"],
        json!([{"kind": "path", "arg": "/file", "under": "/srv/data"}]),
        "the directory serializes as written"
    );
}

#[test]
fn prefix_must_not_be_empty() {
    let doc = base_with(
        "constraints",
        json!([{"kind": "prefix", "arg": "/a", "prefix": ""}]),
    );
    assert!(matches!(refused(doc), ScopeError::Syntax(m) if m.contains("empty prefix")));
}

// --- max ------------------------------------------------------------------------------------

#[test]
fn max_compares_decimal_strings_and_integers_exactly() {
    let s = scope(json!([{"kind": "max", "arg": "/amount", "max": "500.00"}]));
    for ok in [
        json!("500"),
        json!("500.00"),
        json!("499.999999"),
        json!(500),
        json!("0"),
        json!(0),
    ] {
        assert_eq!(covers(&s, json!({ "amount": ok })), Ok(()), "{ok}");
    }
    for above in [
        json!("500.01"),
        json!("500.0000001"),
        json!(501),
        json!("1000"),
    ] {
        assert!(
            matches!(
                covers(&s, json!({ "amount": above })),
                Err(OutOfScope::AboveMaximum { .. })
            ),
            "{above}"
        );
    }
}

#[test]
fn max_refuses_floats_and_malformed_amounts() {
    let s = scope(json!([{"kind": "max", "arg": "/amount", "max": "500"}]));
    for bad in [
        json!(12.5),
        json!(1e2),
        json!("1e2"),
        json!("+5"),
        json!("05"),
        json!(" 5"),
        json!("5."),
        json!(".5"),
        json!("1,000"),
        json!("-0"),
        json!(true),
        json!(null),
        json!(["5"]),
    ] {
        assert_eq!(
            covers(&s, json!({ "amount": bad })).map_err(|e| e.code()),
            Err("not_an_amount"),
            "{bad}"
        );
    }
}

#[test]
fn max_refuses_negative_amounts() {
    let s = scope(json!([{"kind": "max", "arg": "/amount", "max": "500"}]));
    assert_eq!(
        covers(&s, json!({"amount": "-1"})).map_err(|e| e.code()),
        Err("negative_amount")
    );
    assert_eq!(
        covers(&s, json!({"amount": -1})).map_err(|e| e.code()),
        Err("negative_amount")
    );
}

#[test]
fn max_limit_must_be_a_non_negative_decimal_string() {
    for bad in [json!("-1"), json!("1e3"), json!(500), json!("500.")] {
        let doc = base_with(
            "constraints",
            json!([{"kind": "max", "arg": "/a", "max": bad}]),
        );
        assert!(matches!(refused(doc), ScopeError::Syntax(_)), "{bad}");
    }
}

// --- currency -------------------------------------------------------------------------------

#[test]
fn currency_allows_listed_codes_only() {
    let s = scope(json!([{"kind": "currency", "arg": "/currency", "allowed": ["EUR", "USD"]}]));
    assert_eq!(covers(&s, json!({"currency": "EUR"})), Ok(()));
    assert_eq!(
        covers(&s, json!({"currency": "eur"})).map_err(|e| e.code()),
        Err("currency_not_allowed")
    );
    assert_eq!(
        covers(&s, json!({"currency": "GBP"})).map_err(|e| e.code()),
        Err("currency_not_allowed")
    );
    assert_eq!(
        covers(&s, json!({"currency": 978})).map_err(|e| e.code()),
        Err("not_a_string")
    );
    assert_eq!(
        covers(&s, json!({})).map_err(|e| e.code()),
        Err("argument_missing")
    );
}

#[test]
fn currency_list_must_hold_valid_codes() {
    for bad in [json!([]), json!(["eur"]), json!(["EURO"]), json!(["E1R"])] {
        let doc = base_with(
            "constraints",
            json!([{"kind": "currency", "arg": "/c", "allowed": bad}]),
        );
        assert!(matches!(refused(doc), ScopeError::Syntax(_)), "{bad}");
    }
}

// --- all constraints together ---------------------------------------------------------------

#[test]
fn every_constraint_must_hold_and_the_first_failure_is_reported() {
    let s = scope(json!([
        {"kind": "currency", "arg": "/currency", "allowed": ["EUR"]},
        {"kind": "max", "arg": "/amount", "max": "100"},
        {"kind": "prefix", "arg": "/to", "prefix": "DE"},
    ]));
    assert_eq!(
        covers(&s, json!({"currency": "EUR", "amount": "99", "to": "DE1"})),
        Ok(())
    );
    let err = covers(&s, json!({"currency": "EUR", "amount": "101", "to": "FR1"})).unwrap_err();
    assert!(
        matches!(err, OutOfScope::AboveMaximum { rule: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("/amount"));
}

#[test]
fn arguments_must_be_an_object() {
    let s = scope(json!([]));
    assert_eq!(covers(&s, json!([1])), Err(OutOfScope::ArgumentsNotObject));
}

// --- expiry and uses ------------------------------------------------------------------------

#[test]
fn expiry_is_an_exclusive_end() {
    let s = scope(json!([]));
    let end = datetime!(2026-12-31 00:00 UTC);
    assert_eq!(
        s.covers(
            "agent-1",
            "payments.transfer",
            &json!({}),
            end - time::Duration::SECOND
        ),
        Ok(())
    );
    let err = s
        .covers("agent-1", "payments.transfer", &json!({}), end)
        .unwrap_err();
    assert_eq!(err.code(), "expired");
}

#[test]
fn expiry_requires_an_explicit_offset() {
    for bad in [
        "2026-12-31T00:00:00",
        "2026-12-31",
        "31/12/2026",
        "2026-12-31T00:00",
        "",
    ] {
        assert!(
            matches!(refused(base_with("expires_at", json!(bad))), ScopeError::Syntax(m) if m.contains("offset")),
            "{bad}"
        );
    }
    let e = Expiry::parse("2026-12-31T01:00:00+01:00").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(e.instant(), datetime!(2026-12-31 00:00 UTC));
    assert_eq!(e.as_str(), "2026-12-31T01:00:00+01:00");
    let z = Expiry::parse("2026-12-31T00:00:00+00:00").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(z.as_str(), "2026-12-31T00:00:00Z", "one spelling per value");
}

#[test]
fn uses_are_counted_from_one_to_max_uses() {
    let s = scope(json!([]));
    assert_eq!(s.admits_use(1), Ok(()));
    assert_eq!(s.admits_use(5), Ok(()));
    assert_eq!(s.admits_use(6).map_err(|e| e.code()), Err("uses_exhausted"));
    assert!(s.admits_use(0).is_err());
    for bad in [
        json!(0),
        json!(-1),
        json!(9007199254740992u64),
        json!(1.5),
        json!("5"),
    ] {
        assert!(
            matches!(
                refused(base_with("max_uses", bad.clone())),
                ScopeError::Syntax(_)
            ),
            "{bad}"
        );
    }
}

// --- fail closed at parse -------------------------------------------------------------------

#[test]
fn unknown_constraint_kinds_and_members_are_refused() {
    let doc = base_with(
        "constraints",
        json!([{"kind": "regex", "arg": "/a", "pattern": ".*"}]),
    );
    assert!(matches!(refused(doc), ScopeError::Syntax(m) if m.contains("regex")));
    let doc = base_with(
        "constraints",
        json!([{"kind": "prefix", "arg": "/a", "prefix": "x", "case_insensitive": true}]),
    );
    assert!(matches!(refused(doc), ScopeError::Syntax(m) if m.contains("case_insensitive")));
    let doc = base_with("constraints", json!([{"arg": "/a", "prefix": "x"}]));
    assert!(matches!(refused(doc), ScopeError::Syntax(_)));
    assert!(
        matches!(refused(base_with("note", json!("hi"))), ScopeError::Syntax(m) if m.contains("note"))
    );
    let mut doc = base_with("agent", json!("*"));
    if let Some(map) = doc.as_object_mut() {
        map.remove("expires_at");
    }
    assert!(matches!(refused(doc), ScopeError::Syntax(m) if m.contains("expires_at")));
}

#[test]
fn argument_paths_are_json_pointers() {
    let args = json!({"a/b": 1, "m~n": 2, "list": [10, 11], "o": {"p": 3}});
    let get = |p: &str| ArgPath::new(p).ok().and_then(|p| p.resolve(&args).cloned());
    assert_eq!(get("/a~1b"), Some(json!(1)));
    assert_eq!(get("/m~0n"), Some(json!(2)));
    assert_eq!(get("/list/1"), Some(json!(11)));
    assert_eq!(get("/list/01"), None);
    assert_eq!(get("/list/2"), None);
    assert_eq!(get("/o/p"), Some(json!(3)));
    assert_eq!(get("/o/p/q"), None);
    for bad in ["", "a", "/", "/a//b", "/a~2", "/a~"] {
        assert!(ArgPath::new(bad).is_err(), "{bad:?}");
    }
    assert!(ArgPath::new(&"/a".repeat(17)).is_err(), "too deep");
}

#[test]
fn serialized_form_is_deterministic_and_round_trips() {
    let s = scope(json!([
        {"kind": "one_of", "arg": "/to", "values": ["A", null]},
        {"kind": "max", "arg": "/amount", "max": "500.00"},
    ]));
    let jcs = s.to_jcs().unwrap_or_default();
    let text = String::from_utf8(jcs.clone()).unwrap_or_default();
    assert_eq!(
        text,
        r#"{"agent":"agent-*","constraints":[{"arg":"/to","kind":"one_of","values":["A",null]},{"arg":"/amount","kind":"max","max":"500.00"}],"expires_at":"2026-12-31T00:00:00Z","max_uses":5,"tool":"payments.transfer"}"#
    );
    let again = Scope::from_json(&jcs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, s);
    assert_eq!(again.digest().ok(), s.digest().ok());
    let other = scope(json!([{"kind": "max", "arg": "/amount", "max": "500.01"}]));
    assert_ne!(other.digest().ok(), s.digest().ok());
}

// --- properties -----------------------------------------------------------------------------

fn decimal() -> impl Strategy<Value = String> {
    ("[0-9]{1,12}", proptest::option::of("[0-9]{1,8}")).prop_map(|(int, frac)| {
        let int = int.trim_start_matches('0');
        let int = if int.is_empty() { "0" } else { int };
        match frac {
            Some(f) => format!("{int}.{f}"),
            None => int.to_owned(),
        }
    })
}

/// Exact rational comparison through integers scaled to 8 fraction digits.
fn scaled(d: &str) -> u128 {
    let (i, f) = d.split_once('.').unwrap_or((d, ""));
    let f = format!("{f:0<8}");
    i.parse::<u128>().unwrap_or(0) * 100_000_000 + f.parse::<u128>().unwrap_or(0)
}

proptest! {
    #[test]
    fn max_agrees_with_exact_integer_arithmetic(limit in decimal(), amount in decimal()) {
        let s = scope(json!([{"kind": "max", "arg": "/amount", "max": limit}]));
        let expected = scaled(&amount) <= scaled(&limit);
        prop_assert_eq!(covers(&s, json!({ "amount": amount })).is_ok(), expected);
    }

    #[test]
    fn trailing_fraction_zeros_do_not_change_an_amount(d in decimal(), zeros in 0usize..4) {
        let padded = if d.contains('.') { format!("{d}{}", "0".repeat(zeros)) }
                     else { format!("{d}.{}", "0".repeat(zeros + 1)) };
        prop_assert_eq!(Amount::parse(&d), Amount::parse(&padded));
    }

    #[test]
    fn covers_never_panics_on_arbitrary_arguments(key in "[a-z]{1,3}", s in ".{0,20}", n in any::<i64>()) {
        let sc = scope(json!([
            {"kind": "one_of", "arg": "/a", "values": [1]},
            {"kind": "prefix", "arg": "/b", "prefix": "x"},
            {"kind": "max", "arg": "/c", "max": "10"},
            {"kind": "currency", "arg": "/d", "allowed": ["EUR"]},
        ]));
        let _ = covers(&sc, json!({ key.clone(): s.clone(), "a": n, "b": s, "c": n, "d": key }));
    }

    #[test]
    fn star_patterns_match_what_they_enclose(pre in "[a-z.]{0,6}", mid in "[a-z./]{0,10}", post in "[a-z.]{0,6}") {
        let p = Pattern::new(&format!("{pre}*{post}")).unwrap_or_else(|e| panic!("{e}"));
        let text = format!("{pre}{mid}{post}");
        prop_assert!(p.matches(&text));
        let exact = Pattern::new(&format!("{pre}x{post}")).unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(exact.matches(&text), mid == "x");
    }

    #[test]
    fn arbitrary_scope_documents_parse_or_refuse_without_panicking(raw in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Scope::from_json(&raw);
    }
}
