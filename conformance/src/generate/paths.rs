//! Evidence vectors for the `path` rule of a standing grant (SPEC §14.4): the
//! grant signs a directory; each call's path argument is read as an absolute POSIX path, names
//! compared whole, and what two readers of a path could read two ways is refused. A string
//! `prefix` holding a separator makes the grant unreadable, so the traversal that a string prefix
//! admitted has a vector too.

use super::Out;
use super::case::*;
use super::standing::{call, under_grant};
use countersign::Decision::Approved;
use countersign_testkit as tk;
use serde_json::{Value, json};

/// A day after the vectors' `now`: the grant is in force.
const EXPIRES: &str = "2026-11-21T10:00:00Z";

/// agent-7 may read files inside /srv/data, five times.
fn grant(rule: Value) -> Value {
    tk::standing_grant_fields("agent-7", "files.read", json!([rule]), 5, EXPIRES)
}

fn read_under_grant(rule: Value, path: &str) -> Case {
    under_grant(
        call("agent-7", "files.read", json!({ "path": path })),
        &grant(rule),
        Approved,
        1,
    )
}

fn data_dir() -> Value {
    json!({"kind": "path", "arg": "/path", "under": "/srv/data"})
}

pub(crate) fn paths(out: &mut Out) {
    let flags = ["standing-grant", "standing-constraint", "standing-path"];
    for (id, path, description) in [
        (
            "inside",
            "/srv/data/q3/report.pdf",
            "a file inside the directory",
        ),
        ("the-directory", "/srv/data", "the directory itself"),
        (
            "separators-and-dots",
            "/srv//data/./q3//report.pdf/",
            "repeated '/', a '.' name and a trailing '/': read as /srv/data/q3/report.pdf",
        ),
        (
            "three-dots",
            "/srv/data/...",
            "a name of three dots is a name, not a parent",
        ),
    ] {
        out.ev(
            &format!("path::{id}"),
            &format!("a path rule under /srv/data and {description}: covered"),
            &flags,
            read_under_grant(data_dir(), path),
            allow("AAL2"),
        );
    }
    let out_of_scope = || deny_as("APPROVED", "out_of_scope", "AAL2");
    for (id, path, description) in [
        (
            "parent-escapes",
            "/srv/data/../../etc/shadow",
            "'..' names that climb out of the directory",
        ),
        (
            "parent-stays-inside",
            "/srv/data/q3/../q4",
            "a '..' name that would stay inside: refused anywhere (a symbolic link moves it)",
        ),
        (
            "sibling-sharing-the-prefix",
            "/srv/data2/report.pdf",
            "a sibling directory whose name starts with the directory's",
        ),
        ("parent-directory", "/srv", "the directory's parent"),
        (
            "backslash",
            "/srv/data\\..\\..\\etc\\shadow",
            "backslashes, which Windows reads as separators",
        ),
        (
            "percent-encoded",
            "/srv/data/%2e%2e/%2e%2e/etc/shadow",
            "percent-encoded dots, which a decoding tool reads as '..'",
        ),
        (
            "nul",
            "/srv/data/report.pdf\u{0}/../../etc/shadow",
            "a NUL, where C and the kernel end the path",
        ),
        ("relative", "srv/data/report.pdf", "a relative path"),
        (
            "leading-double-slash",
            "//srv/data/report.pdf",
            "a leading '//', which POSIX leaves to the implementation",
        ),
        (
            "other-case",
            "/srv/DATA/report.pdf",
            "a name in another case (no case folding)",
        ),
    ] {
        out.ev(
            &format!("path::{id}"),
            &format!("a path rule under /srv/data and {description}: out of scope"),
            &flags,
            read_under_grant(data_dir(), path),
            out_of_scope(),
        );
    }
    // The grant itself cannot be read: SPEC §14.3 step 3 (the evidence verified nothing yet).
    let unreadable = || deny("evidence_malformed");
    out.ev(
        "path::directory-not-normal",
        "a grant whose path rule's directory has a trailing '/': the directory must be written in \
         its normal form, so the grant is unreadable",
        &["standing-grant", "standing-path"],
        read_under_grant(
            json!({"kind": "path", "arg": "/path", "under": "/srv/data/"}),
            "/srv/data/report.pdf",
        ),
        unreadable(),
    );
    out.ev(
        "path::string-prefix-with-separator",
        "a grant with a string prefix /srv/data/ and a call to /srv/data/../../etc/shadow, which \
         the string starts with: a prefix holding '/' is refused, so the grant is unreadable",
        &["standing-grant", "standing-path"],
        read_under_grant(
            json!({"kind": "prefix", "arg": "/path", "prefix": "/srv/data/"}),
            "/srv/data/../../etc/shadow",
        ),
        unreadable(),
    );
}
