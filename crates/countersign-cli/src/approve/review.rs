//! The approval as the approver page shows it, in the terminal: the same display model
//! (`countersign_server::review_display`: every signed field as a labelled row, the exact JSON,
//! the request sentence, each deceptive character marked), built here from the fields this
//! command hashes itself, never taken from the service.
//!
//! A terminal is not a browser: it would execute an escape sequence and may reorder right-to-left
//! text around a bidi control. So a marked invisible, bidi, control or space character is never
//! written; its name is, in `⟦…⟧`, where the page draws a badge. A lookalike or a character NFC
//! changes is written, followed by its name. Each value stands alone on its own lines, below its
//! label, so no value can run into another. Line breaks inside a text are shown as `⏎` and a new
//! line, tabs as `⇥`.

use super::error::ApproveError;
use countersign::{CanonicalFields, Decision, Profile, ProfileRegistry, b64};
use countersign_server::{Display, ReviewView, Segment, review_display};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One approval, admitted and hashed here.
#[derive(Debug)]
pub(super) struct Reviewed<'p> {
    pub(super) profile: &'p Profile,
    /// The fields the signature covers, admitted under the profile.
    pub(super) fields: CanonicalFields,
    pub(super) display: Display,
}

impl<'p> Reviewed<'p> {
    /// Admit the review's fields under its profile and build what the page would show.
    pub(super) fn new(
        profiles: &'p ProfileRegistry,
        review: &ReviewView,
    ) -> Result<Self, ApproveError> {
        let profile = profiles
            .get(&review.profile)
            .ok_or_else(|| ApproveError::UnknownProfile(review.profile.clone()))?;
        let fields = admit(profile, &review.fields)?;
        // Under `nfc = "normalize"` the page shows the strings as submitted (what the gateway
        // will run), each code point NFC changes marked; they must normalize to what is signed.
        let (shown, nfc) = match &review.submitted_fields {
            Some(submitted) => {
                if admit(profile, submitted)?.jcs() != fields.jcs() {
                    return Err(ApproveError::SubmittedDiffer);
                }
                let raw = json_bytes(submitted)?;
                let changes = countersign::nfc_changes(profile, &raw)
                    .map_err(|e| inadmissible(profile, e))?;
                let marks: BTreeMap<String, Vec<char>> = changes
                    .into_iter()
                    .map(|c| (c.path, c.code_points))
                    .collect();
                (submitted, marks)
            }
            None => (fields.as_value(), BTreeMap::new()),
        };
        let display = review_display(profile, shown, &review.agent_id, &review.tool_name, &nfc);
        Ok(Self {
            profile,
            fields,
            display,
        })
    }

    /// op_hash of a decision on these fields, as the verifier computes it.
    pub(super) fn op_hash(&self, decision: Decision) -> [u8; 32] {
        countersign::op_hash(self.profile, decision, &self.fields).0
    }

    /// The text shown before the question.
    pub(super) fn render(&self, review: &ReviewView) -> String {
        let d = &self.display;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} ({}), severity {}, expires {}",
            line(&[plain(&d.title)]),
            line(&[plain(&review.approval_id)]),
            line(&[plain(&review.severity)]),
            line(&[plain(&review.expires_at)]),
        );
        let _ = writeln!(
            out,
            "Request from agent {} for tool {}",
            line(&d.agent_id),
            line(&d.tool_name)
        );
        if d.marked {
            let _ = writeln!(
                out,
                "\n!! Characters that can deceive a reader are marked ⟦like this⟧ below: read \
                 every mark before you decide."
            );
        }
        if d.nfc_changed {
            let _ = writeln!(
                out,
                "!! Shown as the gateway submitted it; the signed form is its NFC normalization \
                 (marked ⟦… NFC⟧)."
            );
        }
        out.push('\n');
        for row in &d.rows {
            let _ = writeln!(out, "  {}", line(&row.label));
            let _ = writeln!(out, "      {}", text(&row.value, "      "));
            if let Some(grouped) = &row.grouped {
                let _ = writeln!(out, "      (read as {})", line(&[plain(grouped)]));
            }
            for warning in &row.warnings {
                let _ = writeln!(out, "      !! {}", line(&[plain(warning)]));
            }
        }
        let _ = writeln!(out, "\nExactly these fields (JSON):\n{}", text(&d.json, ""));
        let _ = writeln!(
            out,
            "\nop_hash if approved: {} (computed here from the fields above)",
            b64::encode(&self.op_hash(Decision::Approved))
        );
        out
    }
}

fn admit(profile: &Profile, fields: &serde_json::Value) -> Result<CanonicalFields, ApproveError> {
    countersign::admit_fields(profile, &json_bytes(fields)?).map_err(|e| inadmissible(profile, e))
}

fn json_bytes(value: &serde_json::Value) -> Result<Vec<u8>, ApproveError> {
    serde_json::to_vec(value).map_err(|e| ApproveError::Inadmissible {
        profile: String::new(),
        reason: e.to_string(),
    })
}

fn inadmissible(profile: &Profile, e: countersign::CanonError) -> ApproveError {
    ApproveError::Inadmissible {
        profile: profile.id.clone(),
        reason: e.to_string(),
    }
}

fn plain(text: &str) -> Segment {
    Segment {
        text: text.to_owned(),
        mark: None,
    }
}

/// Segments that must stay on one line (a label, a name): a line break is shown, not made.
fn line(segments: &[Segment]) -> String {
    text(segments, "").replace('\n', "")
}

/// Segments as terminal text; a text's own line breaks continue at `indent`.
fn text(segments: &[Segment], indent: &str) -> String {
    let mut out = String::new();
    for segment in segments {
        match &segment.mark {
            None => out.push_str(&unmarked(&segment.text)),
            Some(mark) => match mark.kind {
                "line" => {
                    out.push('⏎');
                    out.push('\n');
                    out.push_str(indent);
                }
                "tab" => out.push('⇥'),
                // Written out: it looks like something else, or NFC changes it.
                "confusable" | "script" | "nfc" => {
                    let _ = write!(out, "{}⟦{}⟧", unmarked(&segment.text), mark.name);
                }
                // Never written: invisible, bidi, control, space and anything new.
                _ => {
                    let _ = write!(out, "⟦{}⟧", mark.name);
                }
            },
        }
    }
    out
}

/// Unmarked text holds no control character (the display marks them all); should one slip
/// through, it is named rather than sent to the terminal.
fn unmarked(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                format!("⟦U+{:04X}⟧", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(fields: serde_json::Value) -> ReviewView {
        serde_json::from_value(json!({
            "approval_id": "apr_1",
            "status": "PENDING",
            "agent_id": "agent-7",
            "tool_name": "transfer",
            "profile": "countersign.tool-call/1",
            "fields": fields,
            "severity": "high",
            "expires_at": "2026-12-05T18:00:00Z",
        }))
        .unwrap()
    }

    /// The terminal text of a tool call with these params.
    fn rendered(params: serde_json::Value) -> String {
        let profiles = ProfileRegistry::builtin();
        let r = review(json!({"agent_id": "agent-7", "tool_name": "transfer", "params": params}));
        Reviewed::new(&profiles, &r).unwrap().render(&r)
    }

    #[test]
    fn a_bidi_override_and_an_escape_are_named_never_written() {
        let text = rendered(json!({"to": "acct\u{202e}9876", "note": "a\u{1b}[2Jb"}));
        assert!(!text.contains('\u{202e}'), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        assert!(text.contains("⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧"), "{text}");
        assert!(text.contains("!! Characters that can deceive"), "{text}");
    }

    #[test]
    fn a_lookalike_is_written_and_named() {
        let text = rendered(json!({"to": "p\u{0430}ypal"}));
        assert!(text.contains("\u{0430}⟦U+0430"), "{text}");
    }
}
