//! `[notify]`: the named notification channels, which approvals each one gets, and the checks
//! on them. The channels themselves (what is sent, how) are in `crate::notify`.
//!
//! A secret (a webhook URL, which is a bearer credential for the channel it posts to, or an
//! SMTP password) is never written in the file: the file names where to read it (`*_file`, a
//! path, or `*_env`, an environment variable), so a configuration can be shown, logged or
//! committed without handing out the right to post into the approvers' channels.

use super::{ConfigError, Severity};
use serde::Deserialize;
use std::path::PathBuf;

/// The longest approval window a tool may have: seven days.
pub const MAX_APPROVAL_SECONDS: u64 = 7 * 24 * 60 * 60;

/// The shortest `reminder_every`: more often than once a minute is noise, not a reminder.
pub const MIN_REMINDER_SECONDS: u64 = 60;

/// `[notify]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    /// `[[notify.channels]]`.
    #[serde(default)]
    pub channels: Vec<ChannelConfig>,
    /// `[[notify.routes]]`: which channels an approval's first notice and reminders go to.
    /// None: every channel gets every PENDING approval.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
}

/// What kind of receiver a channel is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// A Slack incoming webhook (Block Kit message).
    Slack,
    /// A Microsoft Teams Workflows webhook (Adaptive Card 1.5).
    Teams,
    /// The generic JSON webhook (the body `webhook_url` has always sent).
    Webhook,
    /// E-mail over SMTP.
    Email,
}

impl ChannelKind {
    /// The word used in audit lines, metrics and errors.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Slack => "slack",
            Self::Teams => "teams",
            Self::Webhook => "webhook",
            Self::Email => "email",
        }
    }
}

/// How the SMTP connection is protected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmtpTls {
    /// Plain connection upgraded with STARTTLS, which must succeed (port 587 by default).
    #[default]
    Starttls,
    /// TLS from the first byte (port 465 by default).
    Implicit,
    /// No TLS at all: refused unless `smtp_host` is a loopback address (a relay on this host).
    None,
}

/// One `[[notify.channels]]` entry. Which fields apply depends on `kind` (checked at load).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// The channel's name: what routes and escalation steps refer to, and what audit lines name
    /// (never its URL).
    pub name: String,
    pub kind: ChannelKind,
    /// Refused: a webhook URL is a secret. Present only to say so clearly.
    #[serde(default)]
    pub url: Option<String>,
    /// A file holding the webhook URL (slack, teams, webhook).
    #[serde(default)]
    pub url_file: Option<PathBuf>,
    /// An environment variable holding the webhook URL (slack, teams, webhook).
    #[serde(default)]
    pub url_env: Option<String>,
    /// SMTP server host name (email).
    #[serde(default)]
    pub smtp_host: Option<String>,
    /// SMTP port; default 587 (STARTTLS), 465 (implicit TLS) or 25 (none).
    #[serde(default)]
    pub smtp_port: Option<u16>,
    #[serde(default)]
    pub tls: SmtpTls,
    /// Extra PEM certificates trusted for the SMTP server (a private CA); the public web roots
    /// are trusted either way.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// SMTP AUTH user name; with it, one of `password_file` / `password_env`.
    #[serde(default)]
    pub username: Option<String>,
    /// Refused: a password is a secret. Present only to say so clearly.
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    #[serde(default)]
    pub password_env: Option<String>,
    /// The `From` address (email).
    #[serde(default)]
    pub from: Option<String>,
    /// The recipients (email).
    #[serde(default)]
    pub to: Vec<String>,
}

/// One `[[notify.routes]]` entry: approvals of these tools and severities go to these channels.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Tool names; empty: every tool.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Severities; empty: every severity.
    #[serde(default)]
    pub severities: Vec<Severity>,
    pub channels: Vec<String>,
}

/// One step of a tool's `escalation`: `after` seconds unanswered, tell `group` through
/// `channels`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EscalationStep {
    pub after: u64,
    pub group: String,
    pub channels: Vec<String>,
}

/// A channel name: what audit lines carry, so a closed alphabet.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `host` is this machine (the only place an unencrypted SMTP hop is allowed to).
fn loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl ChannelConfig {
    /// The per-kind rules: a secret's source given exactly once and never inline, and the fields
    /// of the other kinds absent.
    fn check(&self) -> Result<(), ConfigError> {
        let bad = |problem: &str| ConfigError::Channel {
            channel: self.name.clone(),
            problem: problem.to_owned(),
        };
        if !valid_name(&self.name) {
            return Err(bad("a channel name is 1 to 64 of A-Z a-z 0-9 - _ ."));
        }
        if self.url.is_some() {
            return Err(ConfigError::InlineSecret {
                channel: self.name.clone(),
                field: "url",
            });
        }
        if self.password.is_some() {
            return Err(ConfigError::InlineSecret {
                channel: self.name.clone(),
                field: "password",
            });
        }
        let url_source = usize::from(self.url_file.is_some()) + usize::from(self.url_env.is_some());
        let email_fields = self.smtp_host.is_some()
            || self.smtp_port.is_some()
            || self.ca_file.is_some()
            || self.username.is_some()
            || self.password_file.is_some()
            || self.password_env.is_some()
            || self.from.is_some()
            || !self.to.is_empty()
            || self.tls != SmtpTls::default();
        if self.kind != ChannelKind::Email {
            if url_source != 1 {
                return Err(bad("needs exactly one of url_file, url_env"));
            }
            if email_fields {
                return Err(bad("SMTP fields apply to kind = \"email\" only"));
            }
            return Ok(());
        }
        if url_source != 0 {
            return Err(bad("an email channel has no url"));
        }
        let host = self
            .smtp_host
            .as_deref()
            .ok_or_else(|| bad("needs smtp_host"))?;
        if self.tls == SmtpTls::None && !loopback(host) {
            return Err(bad(
                "tls = \"none\" is allowed only to a loopback smtp_host (a relay on this host)",
            ));
        }
        let password_source =
            usize::from(self.password_file.is_some()) + usize::from(self.password_env.is_some());
        match (&self.username, password_source) {
            (Some(_), 1) | (None, 0) => {}
            (Some(_), _) => {
                return Err(bad(
                    "username needs exactly one of password_file, password_env",
                ));
            }
            (None, _) => return Err(bad("a password needs a username")),
        }
        if self.from.is_none() {
            return Err(bad("needs from"));
        }
        if self.to.is_empty() {
            return Err(bad("needs at least one address in to"));
        }
        Ok(())
    }
}

impl super::Config {
    /// The checks on `[notify]` and on each tool's waiting rules (window, reminders,
    /// escalation).
    pub(super) fn check_notify(&self) -> Result<(), ConfigError> {
        let mut names = std::collections::BTreeSet::new();
        for channel in &self.notify.channels {
            channel.check()?;
            if !names.insert(channel.name.as_str()) {
                return Err(ConfigError::Channel {
                    channel: channel.name.clone(),
                    problem: "defined twice".into(),
                });
            }
        }
        let known = |name: &str, used_by: &str| {
            if names.contains(name) {
                Ok(())
            } else {
                Err(ConfigError::UnknownChannel {
                    channel: name.to_owned(),
                    used_by: used_by.to_owned(),
                })
            }
        };
        for route in &self.notify.routes {
            for channel in &route.channels {
                known(channel, "[[notify.routes]]")?;
            }
        }
        let window = |seconds: u64, field: &'static str| {
            if seconds > MAX_APPROVAL_SECONDS {
                Err(ConfigError::WindowTooLong(field, seconds))
            } else {
                Ok(())
            }
        };
        window(self.timeouts.approval_seconds, "timeouts.approval_seconds")?;
        for rule in self.tools.iter().chain(std::iter::once(&self.default_tool)) {
            let tool = || rule.name.clone();
            let own = rule
                .approval_seconds
                .unwrap_or(self.timeouts.approval_seconds);
            window(own, "approval_seconds")?;
            if let Some(max) = rule.max_approval_seconds {
                window(max, "max_approval_seconds")?;
                if max < own {
                    return Err(ConfigError::Waiting {
                        tool: tool(),
                        problem: format!(
                            "max_approval_seconds {max} is below the tool's window {own}"
                        ),
                    });
                }
            }
            if rule
                .reminder_every
                .is_some_and(|every| every < MIN_REMINDER_SECONDS)
            {
                return Err(ConfigError::Waiting {
                    tool: tool(),
                    problem: format!("reminder_every must be at least {MIN_REMINDER_SECONDS}"),
                });
            }
            for step in &rule.escalation {
                if step.after == 0 {
                    return Err(ConfigError::Waiting {
                        tool: tool(),
                        problem: "an escalation step's after must be at least 1".into(),
                    });
                }
                if !self.groups.contains_key(&step.group) {
                    return Err(ConfigError::UnknownGroup {
                        tool: tool(),
                        group: step.group.clone(),
                    });
                }
                // Telling a group that may not decide would only be noise (or a leak of the
                // approval's existence to people outside its approver set).
                if !rule.approvers.is_empty() && !rule.approvers.contains(&step.group) {
                    return Err(ConfigError::Waiting {
                        tool: tool(),
                        problem: format!(
                            "escalation names group {:?}, which is not among the tool's approvers",
                            step.group
                        ),
                    });
                }
                if step.channels.is_empty() {
                    return Err(ConfigError::Waiting {
                        tool: tool(),
                        problem: "an escalation step needs at least one channel".into(),
                    });
                }
                for channel in &step.channels {
                    known(channel, "escalation")?;
                }
            }
        }
        Ok(())
    }

    /// The channels an approval of `tool` at `severity` is announced on (and reminded on):
    /// those of every route it matches, or every channel when no route is configured.
    pub fn channels_for(&self, tool: &str, severity: Severity) -> Vec<&str> {
        let mut out: Vec<&str> = if self.notify.routes.is_empty() {
            self.notify
                .channels
                .iter()
                .map(|c| c.name.as_str())
                .collect()
        } else {
            self.notify
                .routes
                .iter()
                .filter(|r| r.tools.is_empty() || r.tools.iter().any(|t| t == tool))
                .filter(|r| r.severities.is_empty() || r.severities.contains(&severity))
                .flat_map(|r| r.channels.iter().map(String::as_str))
                .collect()
        };
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    const CHANNELS: &str = r#"
        [groups]
        finance = ["alice"]
        leads = ["carol"]
        [[notify.channels]]
        name = "ops-slack"
        kind = "slack"
        url_env = "SLACK_URL"
        [[notify.channels]]
        name = "ops-teams"
        kind = "teams"
        url_file = "/run/secrets/teams"
        [[notify.channels]]
        name = "mail"
        kind = "email"
        smtp_host = "smtp.example.org"
        username = "countersign"
        password_env = "SMTP_PASSWORD"
        from = "countersign@example.org"
        to = ["approvers@example.org"]
    "#;

    #[test]
    fn routes_pick_channels_by_tool_and_severity_and_no_route_means_all() {
        let all = Config::from_toml(CHANNELS).unwrap();
        assert_eq!(
            all.channels_for("x", Severity::Low),
            ["mail", "ops-slack", "ops-teams"]
        );
        let routed = Config::from_toml(&format!(
            "{CHANNELS}
            [[notify.routes]]
            channels = [\"mail\"]
            [[notify.routes]]
            tools = [\"payments.transfer\"]
            severities = [\"high\", \"critical\"]
            channels = [\"ops-slack\", \"ops-teams\"]"
        ))
        .unwrap();
        assert_eq!(routed.channels_for("read_file", Severity::High), ["mail"]);
        assert_eq!(
            routed.channels_for("payments.transfer", Severity::Normal),
            ["mail"]
        );
        assert_eq!(
            routed.channels_for("payments.transfer", Severity::Critical),
            ["mail", "ops-slack", "ops-teams"]
        );
    }

    #[test]
    fn inline_secrets_are_refused_by_name() {
        let inline_url = "[[notify.channels]]\nname = \"s\"\nkind = \"slack\"\n\
                          url = \"https://hooks.slack.com/services/T/B/SECRET\"";
        let err = Config::from_toml(inline_url).unwrap_err();
        assert!(
            matches!(&err, ConfigError::InlineSecret { field: "url", .. }),
            "{err}"
        );
        assert!(!err.to_string().contains("SECRET"), "{err}");
        let inline_password =
            CHANNELS.replace("password_env = \"SMTP_PASSWORD\"", "password = \"hunter2\"");
        assert!(matches!(
            Config::from_toml(&inline_password),
            Err(ConfigError::InlineSecret {
                field: "password",
                ..
            })
        ));
    }

    #[test]
    fn malformed_channels_routes_and_waiting_rules_are_refused() {
        for (extra, what) in [
            (
                "[[notify.routes]]\nchannels = [\"nope\"]",
                "an unknown channel in a route",
            ),
            (
                "[[notify.channels]]\nname = \"ops-slack\"\nkind = \"webhook\"\nurl_env = \"X\"",
                "a duplicate name",
            ),
            (
                "[[notify.channels]]\nname = \"w\"\nkind = \"webhook\"",
                "no url source",
            ),
            (
                "[[notify.channels]]\nname = \"w\"\nkind = \"webhook\"\nurl_env = \"X\"\nurl_file = \"/x\"",
                "two url sources",
            ),
            (
                "[[notify.channels]]\nname = \"w\"\nkind = \"webhook\"\nurl_env = \"X\"\nto = [\"a@b\"]",
                "email fields on a webhook",
            ),
            (
                "[[notify.channels]]\nname = \"m2\"\nkind = \"email\"\nsmtp_host = \"smtp.example.org\"\ntls = \"none\"\nfrom = \"a@b\"\nto = [\"c@d\"]",
                "plain SMTP to a remote host",
            ),
            (
                "[[notify.channels]]\nname = \"bad name\"\nkind = \"webhook\"\nurl_env = \"X\"",
                "a name outside the alphabet",
            ),
            (
                "[timeouts]\napproval_seconds = 604801",
                "a window over seven days",
            ),
            (
                "[[tools]]\nname = \"t\"\nreminder_every = 10",
                "reminders every 10 s",
            ),
            (
                "[[tools]]\nname = \"t\"\napproval_seconds = 600\nmax_approval_seconds = 300",
                "a maximum below the window",
            ),
            (
                "[[tools]]\nname = \"t\"\napprovers = [\"finance\"]\nescalation = [{after = 60, group = \"leads\", channels = [\"mail\"]}]",
                "escalation to a group that may not decide",
            ),
            (
                "[[tools]]\nname = \"t\"\nescalation = [{after = 60, group = \"nobody\", channels = [\"mail\"]}]",
                "escalation to an unknown group",
            ),
            (
                "[[tools]]\nname = \"t\"\nescalation = [{after = 60, group = \"leads\", channels = [\"nope\"]}]",
                "escalation through an unknown channel",
            ),
        ] {
            assert!(
                Config::from_toml(&format!("{CHANNELS}\n{extra}")).is_err(),
                "{what} was accepted"
            );
        }
        let ok = Config::from_toml(&format!(
            "{CHANNELS}
            [[notify.channels]]
            name = \"relay\"
            kind = \"email\"
            smtp_host = \"127.0.0.1\"
            tls = \"none\"
            from = \"a@b\"
            to = [\"c@d\"]
            [[tools]]
            name = \"payments.transfer\"
            approvers = [\"finance\", \"leads\"]
            approval_seconds = 604800
            max_approval_seconds = 604800
            reminder_every = 3600
            escalation = [{{after = 7200, group = \"leads\", channels = [\"mail\", \"ops-teams\"]}}]"
        ));
        assert!(ok.is_ok(), "{ok:?}");
    }
}
