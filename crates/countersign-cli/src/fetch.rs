//! `countersign audit fetch`: download the whole audit log with an auditor token.
//!
//! The log's lines are served only to auditors (`GET /v1/audit/lines`, page by page); this
//! lays the pages end to end, which gives the log file exactly as the service holds it, for
//! `countersign audit verify` and `audit recheck`.

use crate::exit::{EXIT_ALLOW, EXIT_UNUSABLE};
use anyhow::Context as _;
use std::io::Write as _;
use std::path::Path;

/// Download every line after `after` from `service` to `out` (stdout when `None`).
pub(crate) fn run(
    service: &str,
    token_file: &Path,
    after: u64,
    out: Option<&Path>,
) -> anyhow::Result<u8> {
    let token = match read_token(token_file) {
        Ok(token) => token,
        Err(e) => {
            eprintln!("countersign: {e:#}");
            return Ok(EXIT_UNUSABLE);
        }
    };
    let base = service.trim_end_matches('/');
    warn_if_in_clear(base);
    let mut sink: Box<dyn std::io::Write> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let fetched = runtime.block_on(download(base, &token, after, &mut sink));
    sink.flush()?;
    match fetched {
        Ok(lines) => {
            eprintln!(
                "countersign: {lines} audit line(s) after line {after}, through line {}",
                after + lines
            );
            Ok(EXIT_ALLOW)
        }
        Err(e) => {
            eprintln!("countersign: {e:#}");
            Ok(EXIT_UNUSABLE)
        }
    }
}

/// The token file's text, without surrounding whitespace.
pub(crate) fn read_token(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let token = text.trim();
    anyhow::ensure!(
        !token.is_empty(),
        "{} holds no token (countersign auditor add NAME prints one)",
        path.display()
    );
    Ok(token.to_owned())
}

/// Plain HTTP beyond loopback carries the token, and the log, in clear.
fn warn_if_in_clear(base: &str) {
    let Ok(url) = url::Url::parse(base) else {
        return;
    };
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if url.scheme() == "http" && !loopback {
        eprintln!(
            "countersign: warning: {base} is plain HTTP beyond loopback: the auditor token and \
             the log travel in clear unless a TLS tunnel carries them"
        );
    }
}

/// Fetch pages until one is empty; returns how many lines were written.
async fn download(
    base: &str,
    token: &str,
    mut after: u64,
    sink: &mut dyn std::io::Write,
) -> anyhow::Result<u64> {
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .context("building the HTTP client")?;
    let first = after;
    loop {
        let url = format!(
            "{base}/v1/audit/lines?after={after}&limit={}",
            countersign_server::AUDIT_PAGE_MAX
        );
        let response = http
            .get(&url)
            .bearer_auth(token)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = response.status();
        let page = response
            .text()
            .await
            .with_context(|| format!("GET {url}"))?;
        if status == reqwest::StatusCode::UNAUTHORIZED {
            anyhow::bail!(
                "the service refused the token (401): it is not a live auditor token (revoked, \
                 mistyped, or a gateway token; see `countersign auditor list`)"
            );
        }
        anyhow::ensure!(status.is_success(), "GET {url}: {status}: {}", page.trim());
        if page.is_empty() {
            return Ok(after - first);
        }
        anyhow::ensure!(
            page.ends_with('\n'),
            "GET {url}: the page does not end with a whole line"
        );
        sink.write_all(page.as_bytes())?;
        after += page.lines().count() as u64;
    }
}
