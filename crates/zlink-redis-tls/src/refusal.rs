//! [`TlsRefusal`]: why a TLS handshake refused a connection, observed inside the handshake
//! (fred reports a failed handshake only as an I/O error with text).

use std::sync::{Arc, Mutex};

use rustls::client::ResolvesClientCert;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use zlink_store_spi::{FailureKind, StoreError};

/// Why the TLS handshake refused the connection: the source of the
/// [`StoreError::Failure`](zlink_store_spi::StoreError::Failure) (kind
/// [`FailureKind::Unavailable`](zlink_store_spi::FailureKind::Unavailable)) that `connect`
/// returns when a [`RedisTlsConfig`](crate::RedisTlsConfig) is set and the handshake fails for
/// one of these reasons.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TlsRefusal {
    /// The server's certificate was rejected: not issued by the configured CA, not valid for
    /// the server name, expired, ...
    #[error("the server's TLS certificate was rejected")]
    ServerCertificate(#[source] rustls::Error),
    /// The server asked for a client certificate and none is configured.
    #[error("the server requires a client certificate and none is configured")]
    ClientCertificateRequired,
}

/// The first refusal the handshakes of one store saw (made by [`RedisTlsConfig::observe`](crate::RedisTlsConfig::observe)).
#[derive(Debug, Default)]
pub struct Observer(Mutex<Option<TlsRefusal>>);

impl Observer {
    /// `e` with the refusal this observer saw as its source, when `e` is the `Unavailable`
    /// failure a refused handshake ends `connect` with; any other error unchanged.
    pub fn explain(observer: Option<&Observer>, e: StoreError) -> StoreError {
        let handshake = matches!(
            &e,
            StoreError::Failure {
                kind: FailureKind::Unavailable,
                ..
            }
        );
        match observer.and_then(Observer::refusal) {
            Some(refusal) if handshake => StoreError::failure(FailureKind::Unavailable, refusal),
            _ => e,
        }
    }

    fn record(&self, refusal: TlsRefusal) {
        if let Ok(mut seen) = self.0.lock() {
            seen.get_or_insert(refusal);
        }
    }

    /// The refusal seen, if any.
    pub fn refusal(&self) -> Option<TlsRefusal> {
        self.0.lock().ok().and_then(|seen| seen.clone())
    }
}

/// The CA verifier, recording what it rejects.
#[derive(Debug)]
pub(crate) struct ObservingVerifier {
    pub(crate) inner: Arc<WebPkiServerVerifier>,
    pub(crate) observer: Arc<Observer>,
}

impl ServerCertVerifier for ObservingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .inspect_err(|e| {
                self.observer
                    .record(TlsRefusal::ServerCertificate(e.clone()))
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// No client certificate, recording that the server asked for one.
#[derive(Debug)]
pub(crate) struct NoClientCertificate(pub(crate) Arc<Observer>);

impl ResolvesClientCert for NoClientCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.0.record(TlsRefusal::ClientCertificateRequired);
        None
    }

    fn has_certs(&self) -> bool {
        false
    }
}
