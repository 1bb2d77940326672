//! Slack: a Block Kit message for an incoming webhook.
//!
//! A header, the facts as a section's fields, one button to the approver page, and a context
//! line saying the details are behind sign-in; `text` is the fallback Slack shows in
//! notifications. Every text is plain text (no mrkdwn to escape) and clipped to the limit Slack
//! documents for its place (header 150 characters, a section field 2000, button text 75, a
//! button URL 3000, `text` 40000); the message has 4 blocks of the 50 allowed.

use super::{Notice, clip};
use serde_json::{Value, json};

const HEADER_MAX: usize = 150;
const FIELD_MAX: usize = 2000;
const BUTTON_TEXT_MAX: usize = 75;
const URL_MAX: usize = 3000;
const TEXT_MAX: usize = 40_000;
const CONTEXT_MAX: usize = 2000;

fn plain(text: &str, max: usize) -> Value {
    json!({"type": "plain_text", "text": clip(text, max)})
}

/// The webhook body for `notice`.
pub(crate) fn payload(notice: &Notice) -> Value {
    let fields = [
        format!("Severity: {}", notice.severity),
        format!("Time left: {}", notice.time_left()),
        format!("Expires: {}", notice.expires()),
        format!("Approval: {}", notice.approval_id),
    ];
    json!({
        "text": clip(
            &format!("{} — {} left: {}", notice.title(), notice.time_left(), notice.approver_url),
            TEXT_MAX,
        ),
        "blocks": [
            {"type": "header", "text": plain(&notice.title(), HEADER_MAX)},
            {
                "type": "section",
                "fields": fields.iter().map(|f| plain(f, FIELD_MAX)).collect::<Vec<_>>(),
            },
            {
                "type": "actions",
                "elements": [{
                    "type": "button",
                    "action_id": "countersign-open-approval",
                    "style": "primary",
                    "text": plain("Review and decide", BUTTON_TEXT_MAX),
                    "url": clip(&notice.approver_url, URL_MAX),
                }],
            },
            {"type": "context", "elements": [plain(Notice::footnote(), CONTEXT_MAX)]},
        ],
    })
}
