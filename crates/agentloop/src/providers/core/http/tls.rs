//! TLS for the provider transport: rustls with the platform's root certificates (the system
//! store, which honours `SSL_CERT_FILE` and `SSL_CERT_DIR`), verified by
//! `rustls-platform-verifier`, plus any extra roots a configuration adds.
//!
//! Loading the system store reads and parses every certificate in it (a few milliseconds, more
//! with a big bundle), so it happens once per process, on the first `https://` connection of an
//! adapter without extra roots, and never in a program that sends no request. An adapter with
//! extra roots builds a verifier of its own (the store plus those roots) on its first
//! connection.

use std::sync::{Arc, OnceLock};

use rustls::ClientConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls_platform_verifier::Verifier;

/// The process-wide verifier over the platform's roots, built on first use.
static PLATFORM: OnceLock<Result<Arc<Verifier>, String>> = OnceLock::new();

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The platform verifier, loading the system's roots on the first call only.
fn platform_verifier() -> Result<Arc<Verifier>, String> {
    PLATFORM
        .get_or_init(|| {
            Verifier::new(provider())
                .map(Arc::new)
                .map_err(|e| format!("the system's root certificates cannot be loaded: {e}"))
        })
        .clone()
}

/// A verifier over the platform's roots and the certificates in `pems` (PEM text, each may
/// hold several certificates).
fn verifier_with(pems: &[String]) -> Result<Arc<Verifier>, String> {
    let mut roots = Vec::new();
    for pem in pems {
        let before = roots.len();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.push(cert.map_err(|e| {
                format!("an extra root certificate is not a valid PEM certificate: {e}")
            })?);
        }
        if roots.len() == before {
            return Err("an extra root certificate holds no PEM certificate".to_owned());
        }
    }
    Verifier::new_with_extra_roots(roots, provider())
        .map(Arc::new)
        .map_err(|e| format!("the extra root certificates cannot be used: {e}"))
}

/// The client configuration of one adapter: the platform verifier (with `extra_roots` when
/// given) and the ALPN protocols to offer, most preferred first.
pub(crate) fn client_config(
    extra_roots: &[String],
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, String> {
    let verifier = if extra_roots.is_empty() {
        platform_verifier()?
    } else {
        verifier_with(extra_roots)?
    };
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS cannot be set up: {e}"))?
        // The platform verifier is the verifier: this is how rustls takes one that is not
        // its built-in WebPKI verifier.
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn extra_roots_that_are_not_pem_are_a_clear_error() {
        let error = client_config(&["not a certificate".to_owned()], &[]).unwrap_err();
        assert!(error.contains("no PEM certificate"), "{error}");
        let broken = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let error = client_config(&[broken.to_owned()], &[]).unwrap_err();
        assert!(error.contains("extra root certificate"), "{error}");
    }
}
