use super::*;

fn listen(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn settled(toml: &str, on: &str) -> (Config, Settled) {
    let mut config = Config::from_toml(toml).unwrap();
    let settled = settle(&mut config, listen(on));
    (config, settled)
}

/// A fresh directory for one test, removed when the test passes.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "countersign-address-{label}-{}-{}",
            std::process::id(),
            time::OffsetDateTime::now_utc().unix_timestamp_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn without_a_config_the_page_and_origin_follow_the_listen_address_as_localhost() {
    for (on, page) in [
        ("127.0.0.1:18080", "http://localhost:18080"),
        ("[::1]:9000", "http://localhost:9000"),
        ("0.0.0.0:8080", "http://localhost:8080"),
    ] {
        let (config, s) = settled("", on);
        assert_eq!(s.public_url, page);
        assert_eq!(config.public_url.as_deref(), Some(page));
        assert_eq!(config.origins, vec![page.to_owned()]);
        assert_eq!(config.rp_id, "localhost");
        assert_eq!(
            (s.public_url_from, s.origins_from),
            (Source::Listen, Source::Listen)
        );
        assert_eq!(s.warnings, vec![], "{on}");
    }
}

#[test]
fn a_configured_public_url_gives_the_origin_and_configured_origins_stay() {
    let (config, s) = settled(
        "rp_id = \"example.org\"\npublic_url = \"https://approve.example.org/\"",
        "127.0.0.1:8080",
    );
    assert_eq!(s.public_url, "https://approve.example.org");
    assert_eq!(
        config.origins,
        vec!["https://approve.example.org".to_owned()]
    );
    assert_eq!(
        (s.public_url_from, s.origins_from),
        (Source::Config, Source::PublicUrl)
    );
    assert_eq!(s.warnings, vec![]);

    let (config, s) = settled(
        "rp_id = \"approve.example.org\"\norigins = [\"https://approve.example.org\"]",
        "10.0.0.5:8080",
    );
    assert_eq!(
        config.origins,
        vec!["https://approve.example.org".to_owned()]
    );
    assert_eq!(s.origins_from, Source::Config);
    // The derived public_url is an IP address; only the origin matters to the browser.
    assert_eq!(s.public_url, "http://10.0.0.5:8080");
    assert_eq!(s.warnings, vec![]);
}

#[test]
fn an_origin_on_another_port_of_this_machine_is_a_warning() {
    let (_, s) = settled("origins = [\"http://localhost:8080\"]", "127.0.0.1:18080");
    assert_eq!(
        s.warnings,
        vec![AddressWarning::NotListening {
            setting: "origin",
            url: "http://localhost:8080".into(),
            listen: listen("127.0.0.1:18080"),
        }]
    );
    let text = s.warnings[0].to_string();
    assert!(text.contains("listens on 127.0.0.1:18080"), "{text}");

    // localhost does not reach a service that listens on one outside address only.
    let (_, s) = settled("public_url = \"http://localhost:8080\"", "192.0.2.7:8080");
    assert!(
        s.warnings
            .iter()
            .all(|w| matches!(w, AddressWarning::NotListening { .. })),
        "{:?}",
        s.warnings
    );
    assert_eq!(s.warnings.len(), 2, "public_url and the origin it gave");
}

#[test]
fn origins_a_browser_refuses_are_warnings() {
    // Listening on one outside address with no config: the page would be an IP address.
    let (_, s) = settled("", "192.0.2.7:8080");
    assert_eq!(
        s.warnings,
        vec![AddressWarning::IpOrigin {
            origin: "http://192.0.2.7:8080".into()
        }]
    );
    let (_, s) = settled(
        "rp_id = \"approve.example.org\"\norigins = [\"http://approve.example.org\"]",
        "127.0.0.1:8080",
    );
    assert!(matches!(
        s.warnings.as_slice(),
        [AddressWarning::InsecureOrigin { .. }]
    ));
    let (_, s) = settled(
        "rp_id = \"other.org\"\norigins = [\"https://approve.example.org\"]",
        "127.0.0.1:8080",
    );
    assert!(matches!(
        s.warnings.as_slice(),
        [AddressWarning::RpIdMismatch { .. }]
    ));
    // A parent domain is a valid rp_id; a suffix that is not a label boundary is not.
    let (_, s) = settled(
        "rp_id = \"ample.org\"\norigins = [\"https://approve.example.org\"]",
        "127.0.0.1:8080",
    );
    assert!(matches!(
        s.warnings.as_slice(),
        [AddressWarning::RpIdMismatch { .. }]
    ));
}

#[test]
fn the_record_is_written_whole_and_read_back() {
    let dir = Scratch::new("record");
    assert_eq!(LastStart::read(&dir.0).unwrap(), None);
    let (config, _) = settled("", "127.0.0.1:18080");
    let record = LastStart::new(
        listen("127.0.0.1:18080"),
        Some(Path::new("c.toml")),
        &config,
    );
    assert!(record.config.as_deref().unwrap().is_absolute());
    record.write(&dir.0).unwrap();
    assert_eq!(LastStart::read(&dir.0).unwrap(), Some(record));
    assert!(!dir.0.join(format!("{LAST_START}.partial")).exists());

    dir.file(LAST_START, "{\"listen\": 8080}");
    let e = LastStart::read(&dir.0).unwrap_err();
    assert!(matches!(e, AddressError::Record { .. }), "{e}");
}

#[test]
fn commands_take_the_address_serve_recorded() {
    let dir = Scratch::new("lookup");
    let (config, _) = settled("", "127.0.0.1:18080");
    LastStart::new(listen("127.0.0.1:18080"), None, &config)
        .write(&dir.0)
        .unwrap();
    let (config, source) = service_config(&dir.0, None).unwrap();
    assert_eq!(config.public_url.as_deref(), Some("http://localhost:18080"));
    assert_eq!(config.origins, vec!["http://localhost:18080".to_owned()]);
    assert!(source.contains("127.0.0.1:18080"), "{source}");

    // The recorded config file is read again: its groups, and its origins where it sets them.
    let file = dir.file(
        "c.toml",
        "origins = [\"http://localhost:18080\", \"https://approve.example.org\"]\n\
         [groups]\nfinance = []",
    );
    let (config, _) = settled(&std::fs::read_to_string(&file).unwrap(), "127.0.0.1:18080");
    LastStart::new(listen("127.0.0.1:18080"), Some(&file), &config)
        .write(&dir.0)
        .unwrap();
    let (config, source) = service_config(&dir.0, None).unwrap();
    assert!(config.groups.contains_key("finance"));
    assert_eq!(config.origins.len(), 2);
    assert_eq!(config.public_url.as_deref(), Some("http://localhost:18080"));
    assert!(source.contains("c.toml"), "{source}");

    // An explicit --config wins over the recorded one; the record still gives the address.
    let other = dir.file("other.toml", "[groups]\nops = []");
    let (config, _) = service_config(&dir.0, Some(&other)).unwrap();
    assert!(config.groups.contains_key("ops"));
    assert_eq!(config.origins, vec!["http://localhost:18080".to_owned()]);
}

#[test]
fn no_record_and_no_config_is_an_error_that_says_what_to_do() {
    let dir = Scratch::new("none");
    let e = service_config(&dir.0, None).unwrap_err();
    assert!(matches!(e, AddressError::NoRecord { .. }));
    let text = e.to_string();
    assert!(
        text.contains("--config") && text.contains(LAST_START),
        "{text}"
    );

    // A config that leaves the address to --listen cannot stand in for the record.
    let bare = dir.file("bare.toml", "[groups]\nops = []");
    let e = service_config(&dir.0, Some(&bare)).unwrap_err();
    assert!(matches!(e, AddressError::Unsettled { .. }), "{e}");

    // One that names its public_url can: the origin follows it.
    let named = dir.file("named.toml", "public_url = \"https://approve.example.org\"");
    let (config, source) = service_config(&dir.0, Some(&named)).unwrap();
    assert_eq!(
        config.origins,
        vec!["https://approve.example.org".to_owned()]
    );
    assert!(source.ends_with("named.toml"), "{source}");
    // ... and one that names only origins links to the first.
    let origins = dir.file("origins.toml", "origins = [\"https://a.example.org\"]");
    let (config, _) = service_config(&dir.0, Some(&origins)).unwrap();
    assert_eq!(config.public_url.as_deref(), Some("https://a.example.org"));
}

#[test]
fn a_recorded_config_that_is_gone_is_named_in_the_error() {
    let dir = Scratch::new("gone");
    let file = dir.file("c.toml", "");
    let (config, _) = settled("", "127.0.0.1:18080");
    LastStart::new(listen("127.0.0.1:18080"), Some(&file), &config)
        .write(&dir.0)
        .unwrap();
    std::fs::remove_file(&file).unwrap();
    let e = service_config(&dir.0, None).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, AddressError::Config { .. }) && text.contains("last started with"),
        "{text}"
    );
}
