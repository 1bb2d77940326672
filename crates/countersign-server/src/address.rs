//! Where approvers reach the service, and how later commands learn it.
//!
//! A configuration may leave `public_url` and `origins` unset. `countersign serve` then settles
//! them from the address it listens on ([`settle`]): the approver page is that address as a
//! browser must open it ([`countersign::browser_url`]: `localhost` for a loopback address, since
//! WebAuthn needs a domain), and the one origin is that page's. It says which it chose, warns
//! about settings a browser cannot use or that point at another port of this machine, and
//! records what it started with in the data directory ([`LastStart`], `DATA_DIR/serve.json`).
//!
//! Commands that act for the service later — `enroll invite` printing a link, `audit verify`
//! re-verifying evidence under the service's origins — take their settings from that record
//! ([`service_config`]) or from an explicit `--config`, never from an assumed port: a link to the
//! wrong port is a dead link, and origins that are not the service's turn every honest
//! approval into an `origin_mismatch`.

use crate::config::{Config, ConfigError};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use url::Url;

/// The record's file name inside the data directory.
pub const LAST_START: &str = "serve.json";

/// Where a setting came from, for what `serve` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The configuration file set it.
    Config,
    /// Derived from the address the service listens on.
    Listen,
    /// Derived from the configured `public_url`.
    PublicUrl,
}

impl Source {
    /// How `serve` names the source.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Config => "from the config",
            Self::Listen => "from --listen",
            Self::PublicUrl => "from public_url",
        }
    }
}

/// What [`settle`] decided.
#[derive(Clone, Debug)]
pub struct Settled {
    /// The base of approval and invite links, without a trailing slash.
    pub public_url: String,
    /// Where `public_url` came from.
    pub public_url_from: Source,
    /// Where `origins` came from.
    pub origins_from: Source,
    /// Settings a browser cannot use, or that point away from this service.
    pub warnings: Vec<AddressWarning>,
}

/// A setting that will not work the way it reads. `serve` starts anyway (a proxy in front of
/// it may make it right) and prints the warning.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressWarning {
    /// An origin is an IP address, which no browser accepts as a WebAuthn relying party.
    #[error(
        "origin {origin} is an IP address: browsers refuse passkeys there (WebAuthn needs a \
         domain); open the page as a name, localhost for this machine"
    )]
    IpOrigin { origin: String },
    /// Plain HTTP on a host other than localhost is not a secure context.
    #[error(
        "origin {origin} is plain http on a host other than localhost: browsers offer passkeys \
         only over https, or on http://localhost"
    )]
    InsecureOrigin { origin: String },
    /// The relying party id is neither the origin's host nor a parent domain of it.
    #[error(
        "rp_id {rp_id:?} is neither the host of origin {origin} nor a parent domain of it: \
         browsers refuse to use it there"
    )]
    RpIdMismatch { rp_id: String, origin: String },
    /// A setting names this machine at a port (or address) the service does not listen on.
    #[error(
        "{setting} {url} names this machine, but the service listens on {listen}: approvers \
         following it reach another port (only a local proxy forwarding it would make it work)"
    )]
    NotListening {
        setting: &'static str,
        url: String,
        listen: SocketAddr,
    },
    /// A setting is not a URL at all.
    #[error("{setting} {url:?} is not a URL: {reason}")]
    NotAUrl {
        setting: &'static str,
        url: String,
        reason: String,
    },
}

/// The approver page's base for a service listening on `listen` with no `public_url`:
/// `http://` and the address as a browser opens it, without a trailing slash.
pub fn listen_url(listen: SocketAddr) -> String {
    let raw = format!("http://{listen}");
    match Url::parse(&raw) {
        Ok(url) => countersign::browser_url(&url)
            .as_str()
            .trim_end_matches('/')
            .to_owned(),
        // A socket address always makes a valid URL; keep the raw text if it ever does not.
        Err(_) => raw,
    }
}

/// Fill in what `config` leaves unset from the address the service listens on, and check the
/// result: `public_url` (default [`listen_url`]) and `origins` (default: `public_url`'s origin).
pub fn settle(config: &mut Config, listen: SocketAddr) -> Settled {
    let (public_url, public_url_from) = match &config.public_url {
        Some(url) => (url.trim_end_matches('/').to_owned(), Source::Config),
        None => (listen_url(listen), Source::Listen),
    };
    let mut warnings = Vec::new();
    let origins_from = if config.origins.is_empty() {
        match Url::parse(&public_url) {
            Ok(url) => config.origins = vec![url.origin().ascii_serialization()],
            Err(e) => warnings.push(AddressWarning::NotAUrl {
                setting: "public_url",
                url: public_url.clone(),
                reason: e.to_string(),
            }),
        }
        match public_url_from {
            Source::Config => Source::PublicUrl,
            other => other,
        }
    } else {
        Source::Config
    };
    config.public_url = Some(public_url.clone());
    warnings.extend(check(config, &public_url, listen));
    Settled {
        public_url,
        public_url_from,
        origins_from,
        warnings,
    }
}

/// What a browser (or this machine's network) will refuse about the settled addresses.
fn check(config: &Config, public_url: &str, listen: SocketAddr) -> Vec<AddressWarning> {
    let mut warnings = Vec::new();
    let settings = std::iter::once(("public_url", public_url))
        .chain(config.origins.iter().map(|o| ("origin", o.as_str())));
    for (setting, text) in settings {
        let url = match Url::parse(text) {
            Ok(url) => url,
            Err(e) => {
                warnings.push(AddressWarning::NotAUrl {
                    setting,
                    url: text.to_owned(),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        if names_this_machine(&url) && !reaches(&url, listen) {
            warnings.push(AddressWarning::NotListening {
                setting,
                url: text.to_owned(),
                listen,
            });
        }
        if setting == "origin" {
            warnings.extend(origin_warning(&config.rp_id, text, &url));
        }
    }
    warnings
}

/// The first reason a browser would refuse passkeys on `origin`: one warning per origin, since
/// an IP address is also insecure and outside every rp_id.
fn origin_warning(rp_id: &str, text: &str, origin: &Url) -> Option<AddressWarning> {
    let origin_text = text.to_owned();
    let Some(host) = origin.host() else {
        return Some(AddressWarning::IpOrigin {
            origin: origin_text,
        });
    };
    let domain = match host {
        url::Host::Domain(domain) => domain.to_ascii_lowercase(),
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => {
            return Some(AddressWarning::IpOrigin {
                origin: origin_text,
            });
        }
    };
    let local = domain == "localhost" || domain.ends_with(".localhost");
    if origin.scheme() != "https" && !local {
        return Some(AddressWarning::InsecureOrigin {
            origin: origin_text,
        });
    }
    let rp_id = rp_id.to_ascii_lowercase();
    if domain != rp_id && !domain.ends_with(&format!(".{rp_id}")) {
        return Some(AddressWarning::RpIdMismatch {
            rp_id,
            origin: origin_text,
        });
    }
    None
}

/// Whether `url` points at this machine itself: `localhost` (or a name under it) or a loopback
/// address. Other names may reach the service through a proxy or DNS, which nobody here can see.
fn names_this_machine(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether a URL naming this machine reaches a service listening on `listen`: same port, and
/// the service listens on loopback or on every address.
fn reaches(url: &Url, listen: SocketAddr) -> bool {
    url.port_or_known_default() == Some(listen.port()) && countersign::is_this_machine(listen.ip())
}

/// What `countersign serve` last started with, in `DATA_DIR/serve.json`: the commands that act
/// for the service later read it (see [`service_config`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastStart {
    /// The address the service listened on (the port chosen, if `--listen` asked for port 0).
    pub listen: SocketAddr,
    /// The configuration file it read (absolute), if any.
    pub config: Option<PathBuf>,
    /// The relying party id it used.
    pub rp_id: String,
    /// The approver origins it accepted.
    pub origins: Vec<String>,
    /// The base of its links.
    pub public_url: String,
    /// When it started (RFC 3339, UTC).
    pub started_at: String,
}

/// Why the service's settings cannot be found or read.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    /// No `--config` and no record of a start.
    #[error(
        "{data_dir} has no record of a `countersign serve` start ({data_dir}/{LAST_START}), so \
         nothing says which address and origins the service uses: start the service with \
         --data-dir {data_dir} first, or pass --config with the service's configuration"
    )]
    NoRecord { data_dir: String },
    /// A configuration that leaves the origins to `--listen`, and no record of a start.
    #[error(
        "{config} sets neither public_url nor origins (the service takes them from the address \
         it listens on), and {data_dir} has no record of a `countersign serve` start: set them \
         in {config}, or start the service with --data-dir {data_dir} first"
    )]
    Unsettled { config: String, data_dir: String },
    /// The record is there but unreadable.
    #[error("reading {path}: {reason}")]
    Record { path: String, reason: String },
    /// The configuration named (or recorded) is unusable.
    #[error("{context}: {source}")]
    Config {
        context: String,
        source: ConfigError,
    },
}

impl LastStart {
    /// The record of a service that listens on `listen` under `config` (settled, see
    /// [`settle`]), read from `config_file` (made absolute so commands run elsewhere find it).
    pub fn new(listen: SocketAddr, config_file: Option<&Path>, config: &Config) -> Self {
        Self {
            listen,
            config: config_file.map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_owned())),
            rp_id: config.rp_id.clone(),
            origins: config.origins.clone(),
            public_url: config.public_url.clone().unwrap_or_default(),
            started_at: crate::clock::rfc3339(time::OffsetDateTime::now_utc()),
        }
    }

    /// Write the record into `data_dir` (a new file renamed over the old one: a reader never
    /// sees half a record).
    pub fn write(&self, data_dir: &Path) -> std::io::Result<()> {
        let path = data_dir.join(LAST_START);
        let partial = data_dir.join(format!("{LAST_START}.partial"));
        let mut text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        text.push('\n');
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, &path)
    }

    /// The record in `data_dir`, or `None` if the service never started there.
    pub fn read(data_dir: &Path) -> Result<Option<Self>, AddressError> {
        let path = data_dir.join(LAST_START);
        let failed = |reason: String| AddressError::Record {
            path: path.display().to_string(),
            reason,
        };
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| failed(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(failed(e.to_string())),
        }
    }
}

/// The configuration a command acting for the service of `data_dir` works under, and a line
/// saying where it came from.
///
/// The file is `explicit` (a `--config`) if given, else the one the service last started with
/// (none: the defaults); whatever it leaves to the listen address is settled from the address
/// in the record, exactly as `serve` settled it. Without a record that is an error, never a
/// guessed port.
pub fn service_config(
    data_dir: &Path,
    explicit: Option<&Path>,
) -> Result<(Config, String), AddressError> {
    let record = LastStart::read(data_dir)?;
    let shown = data_dir.display().to_string();
    let file = match (explicit, &record) {
        (Some(path), _) => Some(path.to_owned()),
        (None, Some(record)) => record.config.clone(),
        (None, None) => return Err(AddressError::NoRecord { data_dir: shown }),
    };
    let mut config = match &file {
        Some(path) => Config::from_file(path).map_err(|source| AddressError::Config {
            context: if explicit.is_some() {
                format!("--config {}", path.display())
            } else {
                format!(
                    "the configuration the service last started with ({}/{LAST_START})",
                    shown
                )
            },
            source,
        })?,
        None => Config::default(),
    };
    let from_file = file.as_ref().map(|p| p.display().to_string());
    let source = match &record {
        // What the file leaves unset is settled as `serve` settled it: from its address.
        Some(record) => {
            settle(&mut config, record.listen);
            let listened = format!(
                "the address `countersign serve` last listened on ({}, in {shown}/{LAST_START})",
                record.listen
            );
            match from_file {
                Some(file) => format!("{file}, and {listened}"),
                None => listened,
            }
        }
        // Only an explicit --config reaches here: it must say where the page is by itself.
        None => {
            let file = from_file.unwrap_or_default();
            if config.public_url.is_none() && config.origins.is_empty() {
                return Err(AddressError::Unsettled {
                    config: file,
                    data_dir: shown,
                });
            }
            settle_from_file(&mut config);
            file
        }
    };
    Ok((config, source))
}

/// Complete a configuration that sets public_url or origins without the other, without a
/// listen address: origins from public_url, or public_url from the first origin.
fn settle_from_file(config: &mut Config) {
    if config.origins.is_empty()
        && let Some(url) = config
            .public_url
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
    {
        config.origins = vec![url.origin().ascii_serialization()];
    }
    if config.public_url.is_none() {
        config.public_url = config.origins.first().cloned();
    }
}

#[cfg(test)]
mod tests;
