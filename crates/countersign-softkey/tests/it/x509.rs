//! The fixture attestation PKI: reproducible, WebAuthn §8.2.1-shaped, chaining to the root.

use countersign_softkey::{
    FIXTURE_AAGUID, build_fixture_certificates, fixture_attestation_certificate,
    fixture_attestation_key, fixture_root_certificate, pem,
};
use p256::ecdsa::signature::Verifier as _;
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer as _;

fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn parse(der: &[u8]) -> X509Certificate<'_> {
    let (rest, cert) = X509Certificate::from_der(der).unwrap();
    assert!(rest.is_empty());
    cert
}

fn issued_by(cert: &X509Certificate<'_>, issuer: &X509Certificate<'_>) -> bool {
    let pk =
        p256::ecdsa::VerifyingKey::from_sec1_bytes(&issuer.public_key().subject_public_key.data)
            .unwrap();
    let sig = p256::ecdsa::Signature::from_der(&cert.signature_value.data).unwrap();
    pk.verify(cert.tbs_certificate.as_ref(), &sig).is_ok()
}

#[test]
fn committed_certificates_are_reproducible() {
    let built = build_fixture_certificates().unwrap();
    assert_eq!(built.root_der, fixture_root_certificate());
    assert_eq!(built.attestation_der, fixture_attestation_certificate());
    let dir = fixtures_dir().join("ca");
    assert_eq!(std::fs::read(dir.join("root.der")).unwrap(), built.root_der);
    assert_eq!(
        std::fs::read_to_string(dir.join("root.pem")).unwrap(),
        pem("CERTIFICATE", &built.root_der)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("attestation.pem")).unwrap(),
        pem("CERTIFICATE", &built.attestation_der)
    );
}

#[test]
fn attestation_certificate_meets_webauthn_8_2_1() {
    let cert = parse(fixture_attestation_certificate());
    assert_eq!(cert.version().0, 2, "X.509 v3");
    let subject = cert.subject();
    let one = |it: &mut dyn Iterator<Item = &x509_parser::x509::AttributeTypeAndValue<'_>>| {
        let v: Vec<String> = it.map(|a| a.as_str().unwrap().to_owned()).collect();
        assert_eq!(v.len(), 1);
        v[0].clone()
    };
    assert_eq!(one(&mut subject.iter_country()), "US");
    assert_eq!(one(&mut subject.iter_organization()), "Countersign Test");
    assert_eq!(
        one(&mut subject.iter_organizational_unit()),
        "Authenticator Attestation"
    );
    assert!(!one(&mut subject.iter_common_name()).is_empty());
    let bc = cert.basic_constraints().unwrap().unwrap();
    assert!(!bc.value.ca);
    let aaguid_ext = cert
        .extensions()
        .iter()
        .find(|e| e.oid.to_id_string() == "1.3.6.1.4.1.45724.1.1.4")
        .expect("aaguid extension");
    assert!(!aaguid_ext.critical, "§8.2.1: MUST NOT be critical");
    assert_eq!(
        aaguid_ext.value,
        [&[0x04, 0x10][..], &FIXTURE_AAGUID].concat()
    );
    // The certificate's key is the attestation signing key.
    let countersign_softkey::PublicKey::Es256(pk) = fixture_attestation_key().unwrap().public_key()
    else {
        panic!()
    };
    assert_eq!(
        &cert.public_key().subject_public_key.data[..],
        pk.to_sec1_point(false).as_bytes()
    );
}

#[test]
fn attestation_chains_to_the_root() {
    let root = parse(fixture_root_certificate());
    let att = parse(fixture_attestation_certificate());
    assert!(root.basic_constraints().unwrap().unwrap().value.ca);
    assert_eq!(att.issuer(), root.subject());
    assert!(issued_by(&att, &root));
    assert!(issued_by(&root, &root), "root is self-signed");
    // Negative: the attestation certificate is not self-signed, and the root is not issued by it.
    assert!(!issued_by(&att, &att));
    assert!(!issued_by(&root, &att));
    assert!(att.validity().is_valid());
}

#[test]
fn committed_rsa_pem_matches_der() {
    let dir = fixtures_dir().join("keys");
    for stem in ["alice-rs256", "bob-rs256"] {
        let der = std::fs::read(dir.join(format!("{stem}.pk8.der"))).unwrap();
        let pem_text = std::fs::read_to_string(dir.join(format!("{stem}.pk8.pem"))).unwrap();
        assert_eq!(pem_text, pem("PRIVATE KEY", &der));
    }
}
