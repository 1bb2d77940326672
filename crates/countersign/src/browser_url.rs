//! The address a browser opens a service's approver page at.
//!
//! WebAuthn binds every credential to a relying party id, which must be a domain: a page opened
//! at an IP address (`http://127.0.0.1:8080`) cannot use a passkey at all. Browsers also offer
//! WebAuthn only in a secure context, and plain `http://localhost` is the one such context that
//! needs no certificate. So a service reached at a loopback address (or listening on every
//! address) is opened as `localhost`, on the same port.
//!
//! One rule for both sides: the service derives its approver origin and links from the address
//! it listens on with it, and a gateway given the service's URL derives the origin the approver's
//! evidence carries with it. `http://127.0.0.1:8080` and `http://localhost:8080` therefore name
//! one service and one approver origin.

use std::net::IpAddr;
use url::{Host, Url};

/// `service` as a browser must open it for passkeys to work: a loopback or unspecified IP host
/// (`127.0.0.1`, `::1`, `0.0.0.0`, `::`) becomes `localhost`; every other URL is returned as it
/// is (a domain, or an IP address that no browser will use WebAuthn on).
pub fn browser_url(service: &Url) -> Url {
    let ip = match service.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(Host::Domain(_)) | None => return service.clone(),
    };
    if !is_this_machine(ip) {
        return service.clone();
    }
    let mut url = service.clone();
    match url.set_host(Some("localhost")) {
        Ok(()) => url,
        // Only a URL that cannot have a host refuses one, and this one had an IP host.
        Err(_) => service.clone(),
    }
}

/// Whether `ip` is reached as `localhost` from this machine: a loopback address, or the
/// unspecified address a service listens on to accept every interface (IPv4-mapped IPv6
/// addresses count as their IPv4 address).
pub fn is_this_machine(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn browser(text: &str) -> String {
        browser_url(&Url::parse(text).unwrap()).to_string()
    }

    #[test]
    fn loopback_and_unspecified_addresses_are_opened_as_localhost_on_the_same_port() {
        for (given, opened) in [
            ("http://127.0.0.1:18080", "http://localhost:18080/"),
            ("http://127.0.0.2:8080/", "http://localhost:8080/"),
            ("http://[::1]:9000/base/", "http://localhost:9000/base/"),
            ("http://0.0.0.0:8080", "http://localhost:8080/"),
            ("http://[::]:8080", "http://localhost:8080/"),
            ("http://[::ffff:127.0.0.1]:8080", "http://localhost:8080/"),
            ("https://127.0.0.1", "https://localhost/"),
        ] {
            assert_eq!(browser(given), opened, "{given}");
        }
    }

    #[test]
    fn names_and_other_addresses_are_left_alone() {
        for given in [
            "http://localhost:8080/",
            "https://approve.example.org/",
            "http://192.168.1.5:8080/",
            "http://[2001:db8::1]:8080/",
            "http://countersign.internal:8080/",
        ] {
            assert_eq!(browser(given), given);
        }
        assert!(!is_this_machine("10.0.0.1".parse().unwrap()));
        assert!(is_this_machine("127.9.9.9".parse().unwrap()));
    }
}
