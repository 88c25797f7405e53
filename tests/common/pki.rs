//! Certificates for the TLS tests (quic, grpc --tls): a CA and a server certificate it signed.

// Helpers outside #[test] fns fail their test by panicking, as the tests do (clippy.toml).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A CA, written as `NAME-ca.pem` into `dir`, and a server certificate it signed for
/// 127.0.0.1 (`NAME-cert.pem`, `NAME-key.pem`).
pub struct Pki {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn make_pki(dir: &Path, name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("wirebench test CA {name}"));
    ca_params.distinguished_name = dn;
    let ca = ca_params.self_signed(&ca_key).unwrap();

    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();

    let pki = Pki {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}-cert.pem")),
        key: dir.join(format!("{name}-key.pem")),
    };
    std::fs::write(&pki.ca, ca.pem()).unwrap();
    std::fs::write(&pki.cert, cert.pem()).unwrap();
    std::fs::write(&pki.key, key.serialize_pem()).unwrap();
    pki
}
