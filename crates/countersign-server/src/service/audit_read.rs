//! Who may read the text of audit lines.
//!
//! A line records what an agent asked for (the tool's arguments), who answered, which gateway
//! asked, or an enrolled credential: it is not for everyone. Proofs over the log carry hashes
//! only and go to anyone (`proofs`). The text of one line goes to the gateway whose approval it
//! records, the approval named by its `approval_id`, owned by the gateway that created it (the
//! same ownership the gateway API enforces); a line that records no approval (an enrollment, a
//! revocation, a preauthorization change) or an approval from before gateways authenticated
//! belongs to no gateway. Every line, and pages of the whole log, go to an auditor.

use super::AppState;
use super::proofs::InclusionProof;
use crate::error::{ApiError, ErrorCode};
use std::sync::Arc;

/// Lines an auditor's page holds unless it asks for fewer.
pub const AUDIT_PAGE_DEFAULT: usize = 1000;
/// Most lines one page holds.
pub const AUDIT_PAGE_MAX: usize = 10_000;

/// Who asks for a line's text, authenticated by the HTTP layer.
#[derive(Debug, Clone)]
pub enum LineReader {
    /// A gateway, by name: the lines of its own approvals.
    Gateway(Arc<str>),
    /// An auditor, by name: every line.
    Auditor(Arc<str>),
}

/// The approval a line records (its `approval_id` member), if any.
fn approval_of_line(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    value.get("approval_id")?.as_str().map(str::to_owned)
}

impl AppState {
    /// The inclusion proof of line `seq` in the tree of the first `size` lines, with the line,
    /// for `reader` if the line is theirs to read: 403 `not_your_line` otherwise.
    pub async fn inclusion_proof_with_line(
        &self,
        seq: u64,
        size: u64,
        reader: &LineReader,
    ) -> Result<InclusionProof, ApiError> {
        let (mut proof, line) = self.proof_and_line(seq, size).await?;
        if let LineReader::Gateway(gateway) = reader
            && !self.line_is_gateways(&line, gateway).await?
        {
            return Err(ApiError::forbidden(
                ErrorCode::NotYourLine,
                format!(
                    "line {seq} does not record an approval of this gateway; its proof is \
                     served without include=line, and every line to an auditor"
                ),
            ));
        }
        proof.line = Some(line);
        Ok(proof)
    }

    /// Whether `line` records an approval that `gateway` created.
    async fn line_is_gateways(&self, line: &str, gateway: &str) -> Result<bool, ApiError> {
        let Some(id) = approval_of_line(line) else {
            return Ok(false);
        };
        let approval = self.blocking(move |s| s.get(&id)).await?;
        Ok(approval.is_some_and(|a| a.gateway.as_deref() == Some(gateway)))
    }

    /// Up to `limit` lines after line `after`, in order, exactly as the log holds them: an
    /// auditor's page of the whole log. Only sealed lines are read (on PostgreSQL an event
    /// committed in the last instant may be a line a moment later).
    pub async fn audit_page(&self, after: u64, limit: usize) -> Result<Vec<String>, ApiError> {
        if limit == 0 || limit > AUDIT_PAGE_MAX {
            return Err(ApiError::bad_request(
                ErrorCode::BadRange,
                format!("limit must be 1..={AUDIT_PAGE_MAX}, got {limit}"),
            ));
        }
        let lines = self
            .blocking(move |s| s.audit_lines_after(after, limit))
            .await?;
        Ok(lines.into_iter().map(|(_, line)| line).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::approval_of_line;

    #[test]
    fn a_line_records_the_approval_its_approval_id_names() {
        assert_eq!(
            approval_of_line(r#"{"kind":"grant","approval_id":"a1","seq":3}"#).as_deref(),
            Some("a1")
        );
        // An enrollment line, a line whose approval_id is not a string, text that is not JSON.
        for none in [
            r#"{"kind":"enrollment","principal":"alice"}"#,
            r#"{"kind":"grant","approval_id":7}"#,
            "not json",
        ] {
            assert_eq!(approval_of_line(none), None, "{none}");
        }
    }
}
