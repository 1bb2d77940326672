//! E-mail over SMTP with `lettre`: STARTTLS (required, never opportunistic), implicit TLS, or no
//! TLS to a relay on this host; AUTH when a user name is configured; a `multipart/alternative`
//! message with a plain-text and an HTML part carrying the same content and link.
//!
//! Each message has a `Message-ID` derived from the approval and the step
//! (`<ID.STEP@DOMAIN>`), so a repeated attempt is recognisably the same message, and the later
//! steps refer to the first (`In-Reply-To`, `References`), so a mail client threads them.

use super::{Attempt, Notice, NotifyError, Step, secret};
use crate::config::{ChannelConfig, SmtpTls};
use lettre::message::{Mailbox, Message, MultiPart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use std::time::Duration;

/// How long one SMTP conversation may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(10);

/// A channel's SMTP transport and envelope.
pub(super) struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    to: Vec<Mailbox>,
    /// The right-hand side of every `Message-ID`: the `From` address's domain.
    domain: String,
}

impl Mailer {
    pub(super) fn new(config: &ChannelConfig) -> Result<Self, NotifyError> {
        let bad = |problem: String| NotifyError::Email {
            channel: config.name.clone(),
            problem,
        };
        let host = config.smtp_host.clone().unwrap_or_default();
        let tls = match config.tls {
            SmtpTls::None => None,
            mode => {
                let mut params = TlsParameters::builder(host.clone());
                if let Some(path) = &config.ca_file {
                    let pem = std::fs::read(path)
                        .map_err(|e| bad(format!("reading ca_file {}: {e}", path.display())))?;
                    let cert = Certificate::from_pem(&pem)
                        .map_err(|e| bad(format!("ca_file {}: {e}", path.display())))?;
                    params = params.add_root_certificate(cert);
                }
                let params = params
                    .build_rustls()
                    .map_err(|e| bad(format!("TLS parameters: {e}")))?;
                Some(if mode == SmtpTls::Implicit {
                    Tls::Wrapper(params)
                } else {
                    Tls::Required(params)
                })
            }
        };
        let port = config.smtp_port.unwrap_or(match config.tls {
            SmtpTls::Starttls => 587,
            SmtpTls::Implicit => 465,
            SmtpTls::None => 25,
        });
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&host)
            .port(port)
            .timeout(Some(SMTP_TIMEOUT));
        if let Some(tls) = tls {
            builder = builder.tls(tls);
        }
        if let Some(user) = &config.username {
            let password = secret(
                &config.name,
                config.password_file.as_deref(),
                config.password_env.as_deref(),
            )?
            .unwrap_or_default();
            builder = builder.credentials(Credentials::new(user.clone(), password));
        }
        let from: Mailbox = config
            .from
            .as_deref()
            .unwrap_or_default()
            .parse()
            .map_err(|e| bad(format!("from: {e}")))?;
        let to = config
            .to
            .iter()
            .map(|a| a.parse().map_err(|e| bad(format!("to {a:?}: {e}"))))
            .collect::<Result<Vec<Mailbox>, _>>()?;
        let domain = from.email.domain().to_owned();
        Ok(Self {
            transport: builder.build(),
            from,
            to,
            domain,
        })
    }

    /// One attempt: a transient SMTP failure (4xx, no connection, timeout) may be retried, a
    /// permanent one (5xx) may not.
    pub(super) async fn send(&self, notice: &Notice) -> Attempt {
        let message = match message(notice, &self.from, &self.to, &self.domain) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "e-mail notification could not be built");
                return Attempt::Refused;
            }
        };
        match self.transport.send(message).await {
            Ok(_) => Attempt::Delivered,
            Err(e) if e.is_permanent() => {
                tracing::debug!(error = %e, "e-mail refused");
                Attempt::Refused
            }
            Err(e) => {
                tracing::debug!(error = %e, "e-mail attempt failed");
                Attempt::NoAnswer
            }
        }
    }
}

/// The `Message-ID` of a notice's step.
pub(crate) fn message_id(approval_id: &str, step: Step, domain: &str) -> String {
    format!("<{approval_id}.{}@{domain}>", step.key())
}

/// HTML-escape text (every value is the service's own, but the rule costs nothing).
fn escape(text: &str) -> String {
    [
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("\"", "&quot;"),
        ("'", "&#39;"),
    ]
    .iter()
    .fold(text.to_owned(), |out, (from, to)| out.replace(from, to))
}

/// The message for a notice.
pub(crate) fn message(
    notice: &Notice,
    from: &Mailbox,
    to: &[Mailbox],
    domain: &str,
) -> Result<Message, lettre::error::Error> {
    let facts = [
        ("Severity", notice.severity.clone()),
        ("Time left", notice.time_left()),
        ("Expires", notice.expires()),
        ("Approval", notice.approval_id.clone()),
    ];
    let plain = format!(
        "{}\n\n{}\n\nReview and decide: {}\n\n{}\n",
        notice.title(),
        facts
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("\n"),
        notice.approver_url,
        Notice::footnote()
    );
    let html = format!(
        "<!doctype html><html><body><h2>{}</h2><table>{}</table>\
         <p><a href=\"{url}\">Review and decide</a></p><p><small>{}</small></p></body></html>",
        escape(&notice.title()),
        facts
            .iter()
            .map(|(k, v)| format!("<tr><th align=\"left\">{k}</th><td>{}</td></tr>", escape(v)))
            .collect::<String>(),
        escape(Notice::footnote()),
        url = escape(&notice.approver_url),
    );
    let mut builder = Message::builder()
        .from(from.clone())
        .subject(notice.title())
        .message_id(Some(message_id(&notice.approval_id, notice.step, domain)));
    for address in to {
        builder = builder.to(address.clone());
    }
    if notice.step != Step::New {
        let first = message_id(&notice.approval_id, Step::New, domain);
        builder = builder.in_reply_to(first.clone()).references(first);
    }
    builder.multipart(MultiPart::alternative_plain_html(plain, html))
}
