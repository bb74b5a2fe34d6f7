//! The TLS client configuration every outbound TLS connection of clawbridge uses: the capture
//! forwarder's upstream (HTTPS and the Responses WebSocket) and `wss://` app-server members. One
//! place decides the roots (the system's, plus an operator's CA file), the protocol versions and
//! the crypto provider, so the two can never drift apart.

use std::path::Path;
use std::sync::Arc;

/// Largest CA file read.
const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;

/// A client configuration trusting the system's roots and, when given, the PEM certificates in
/// `extra_ca` (named by `flag` in errors: `--upstream-ca`, `--app-server-ca`). Offers
/// `http/1.1` by ALPN: both users speak HTTP/1.1 (an upgrade for the WebSockets).
pub fn client_config(extra_ca: Option<&Path>, flag: &str) -> crate::Result<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        tracing::debug!("TLS: no system root certificates were found");
    }
    if let Some(path) = extra_ca {
        let pem = super::fs::read_file_capped(path, MAX_CA_FILE_BYTES)?;
        let invalid = |message: String| crate::Error::InvalidDocument {
            path: path.to_path_buf(),
            message,
        };
        let mut found = 0;
        for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
            let certificate =
                certificate.map_err(|error| invalid(format!("not a PEM certificate: {error}")))?;
            roots
                .add(certificate)
                .map_err(|error| invalid(format!("not a usable CA certificate: {error}")))?;
            found += 1;
        }
        if found == 0 {
            return Err(invalid("no PEM certificate in it".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| crate::Error::InvalidArgument {
            flag: flag.to_string(),
            message: format!("cannot set up TLS: {error}"),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The name a server's certificate must carry for `host` (a DNS name or an IP address; an
/// IPv6 address may come in brackets, as URLs write it).
pub fn server_name(host: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(bare.to_string()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused_naming_it() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, "not a certificate\n").expect("write");
        let error = client_config(Some(&file), "--app-server-ca")
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains("ca.pem") && error.contains("no PEM certificate"),
            "{error}"
        );
        assert!(client_config(None, "--app-server-ca").is_ok());
        assert!(server_name("[::1]").is_some() && server_name("codex.internal").is_some());
        assert!(server_name("bad host").is_none());
    }
}
