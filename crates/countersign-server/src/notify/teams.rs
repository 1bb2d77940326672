//! Microsoft Teams: a message with one Adaptive Card (schema 1.5) for a Workflows webhook
//! ("Post to a channel when a webhook request is received").
//!
//! The card has the headline, the facts as a `FactSet`, the footnote, and one `Action.OpenUrl`
//! to the approver page: the same content as every channel.

use super::Notice;
use serde_json::{Value, json};

/// The webhook body for `notice`.
pub(crate) fn payload(notice: &Notice) -> Value {
    let fact = |title: &str, value: String| json!({"title": title, "value": value});
    json!({
        "type": "message",
        "attachments": [{
            "contentType": "application/vnd.microsoft.card.adaptive",
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": "1.5",
                "body": [
                    {
                        "type": "TextBlock",
                        "text": notice.title(),
                        "weight": "Bolder",
                        "size": "Medium",
                        "wrap": true,
                    },
                    {
                        "type": "FactSet",
                        "facts": [
                            fact("Severity", notice.severity.clone()),
                            fact("Time left", notice.time_left()),
                            fact("Expires", notice.expires()),
                            fact("Approval", notice.approval_id.clone()),
                        ],
                    },
                    {
                        "type": "TextBlock",
                        "text": Notice::footnote(),
                        "isSubtle": true,
                        "wrap": true,
                    },
                ],
                "actions": [{
                    "type": "Action.OpenUrl",
                    "title": "Review and decide",
                    "url": notice.approver_url,
                }],
            },
        }],
    })
}
