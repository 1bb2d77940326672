//! The request headers checked before a body is judged: `Host` and `Origin` (DNS rebinding),
//! and the routing headers that restate the body (`Mcp-Method`, `Mcp-Name`).

use crate::admission;
use axum::http::{HeaderMap, header};
use serde_json::Value;
use url::Url;

/// Check `Mcp-Method` and `Mcp-Name` against the admitted body: each, when sent, must appear
/// once and equal what the body says (`Mcp-Name`: `params.name` of `tools/call` and
/// `prompts/get`, `params.uri` of `resources/read`, `params.taskId` of the tasks extension's
/// `tasks/get`, `tasks/update` and `tasks/cancel`; no other message has a name to restate).
pub(super) fn routing_headers_match(
    headers: &HeaderMap,
    text: &str,
    message: &admission::Message,
) -> Result<(), &'static str> {
    let single = |name: &str| -> Result<Option<&str>, &'static str> {
        let mut values = headers.get_all(name).iter();
        let first = values.next();
        if values.next().is_some() {
            return Err("a routing header appears more than once");
        }
        first
            .map(|v| {
                v.to_str()
                    .map_err(|_| "a routing header is not visible ASCII")
            })
            .transpose()
    };
    if let Some(method) = single("mcp-method")?
        && message.method.as_deref() != Some(method)
    {
        return Err("Mcp-Method does not match the body's method");
    }
    if let Some(name) = single("mcp-name")? {
        let member = match message.method.as_deref() {
            Some("tools/call" | "prompts/get") => "name",
            Some("resources/read") => "uri",
            Some("tasks/get" | "tasks/update" | "tasks/cancel") => "taskId",
            _ => return Err("Mcp-Name on a message that names nothing"),
        };
        let named = message
            .params
            .clone()
            .and_then(|p| serde_json::from_str::<Value>(&text[p]).ok())
            .and_then(|p| p.get(member).cloned());
        if named != Some(Value::from(name)) {
            return Err("Mcp-Name does not match the body");
        }
    }
    Ok(())
}

/// Browsers send `Origin`; anything but a loopback page is refused (DNS rebinding: the spec's
/// MUST for Streamable HTTP servers). Clients outside a browser send none.
pub(super) fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Some(url) = origin.to_str().ok().and_then(|o| Url::parse(o).ok()) else {
        return false;
    };
    matches!(
        url.host(),
        Some(url::Host::Domain("localhost"))
            | Some(url::Host::Ipv4(std::net::Ipv4Addr::LOCALHOST))
            | Some(url::Host::Ipv6(std::net::Ipv6Addr::LOCALHOST))
    )
}

/// The host part of a `Host` value or an `allowed_hosts` entry (`name`, `name:port`, `[v6]:port`,
/// an IP), in the form a URL parser gives it: lower case, IPs canonical, IPv6 in brackets.
pub(super) fn host_name(value: &str) -> Option<String> {
    let url = Url::parse(&format!("http://{}/", value.trim())).ok()?;
    if url.path() != "/"
        || url.username() != ""
        || url.query().is_some()
        || url.fragment().is_some()
    {
        return None;
    }
    url.host_str().map(str::to_owned)
}

/// Whether an `allowed_hosts` entry names a host (`name`, `name:port`, an IP, `[v6]:port`).
pub(crate) fn is_host_name(entry: &str) -> bool {
    !entry.trim().is_empty() && host_name(entry).is_some()
}

/// `localhost`, a name under it, 127.0.0.0/8 or `[::1]`.
pub(super) fn is_loopback_host(host: &str) -> bool {
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    ip.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    #[test]
    fn host_values_are_read_as_a_url_parser_reads_them() {
        for (value, host) in [
            ("localhost", Some("localhost")),
            ("LOCALHOST:8080", Some("localhost")),
            ("127.0.0.1:9", Some("127.0.0.1")),
            ("[::1]:7300", Some("[::1]")),
            ("Mcp.Example", Some("mcp.example")),
            ("evil@localhost", None),
            ("localhost/x", None),
            ("localhost?x", None),
            ("localhost#x", None),
            ("", None),
        ] {
            assert_eq!(host_name(value).as_deref(), host, "{value:?}");
        }
        for loopback in [
            "localhost",
            "app.localhost",
            "127.0.0.1",
            "127.9.9.9",
            "[::1]",
        ] {
            assert!(is_loopback_host(loopback), "{loopback}");
        }
        for other in [
            "localhost.example",
            "10.0.0.1",
            "[::2]",
            "0.0.0.0",
            "example",
        ] {
            assert!(!is_loopback_host(other), "{other}");
        }
    }

    #[test]
    fn only_loopback_origins_are_let_in() {
        let mut h = HeaderMap::new();
        assert!(origin_allowed(&h));
        for (origin, ok) in [
            ("http://localhost:3000", true),
            ("http://127.0.0.1:8080", true),
            ("http://[::1]", true),
            ("https://evil.example", false),
            ("null", false),
        ] {
            h.insert(header::ORIGIN, HeaderValue::from_static(origin));
            assert_eq!(origin_allowed(&h), ok, "{origin}");
        }
    }
}
