//! Mesh transport TLS (`docs/transport.md`, "TLS"): mutual verification of both ends by one
//! configured CA, and a node's security identity — the DNS name its certificate is valid for —
//! checked against the identity the peer's descriptor publishes.
//!
//! A node's identity is `tls:{name}` under TLS and `plaintext:{rid}` without it. A dialer that
//! knows the identity its target published verifies the target's certificate for that name; an
//! acceptor that holds an intent for the dialer's RoutingId (from its descriptor) verifies the
//! dialer's client certificate for that intent's name after the dialer's `HELLO`. Where no
//! identity is known yet (a manual peer without one), the CA chain alone is checked.

use std::fmt;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use zlink_codec::RoutingId;

/// The prefix of a TLS security identity in a descriptor.
const TLS_PREFIX: &str = "tls:";
/// The prefix of a plaintext security identity in a descriptor.
const PLAINTEXT_PREFIX: &str = "plaintext:";

/// How a MeshNode admits connections, as its descriptor publishes it (`securityIdentity`,
/// spec 21 §3.4; spec 06 §5 "security identity").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SecurityIdentity {
    /// No TLS: `plaintext:{rid}`.
    Plaintext,
    /// TLS: the peer's certificate must be valid for this DNS name (`tls:{name}`).
    Tls(String),
}

impl SecurityIdentity {
    /// Reads a descriptor's `securityIdentity` (`plaintext:…` or `tls:{name}`).
    pub fn parse(text: &str) -> Result<Self, MeshTlsError> {
        if text.starts_with(PLAINTEXT_PREFIX) {
            return Ok(Self::Plaintext);
        }
        match text.strip_prefix(TLS_PREFIX) {
            Some(name) => {
                server_name(name)?;
                Ok(Self::Tls(name.to_owned()))
            }
            None => Err(MeshTlsError::UnknownIdentity),
        }
    }

    /// The text a descriptor publishes for this identity on the node `rid`.
    pub fn published(&self, rid: &RoutingId) -> String {
        match self {
            Self::Plaintext => format!("{PLAINTEXT_PREFIX}{rid}"),
            Self::Tls(name) => format!("{TLS_PREFIX}{name}"),
        }
    }
}

impl fmt::Display for SecurityIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Plaintext => f.write_str("plaintext"),
            Self::Tls(name) => write!(f, "{TLS_PREFIX}{name}"),
        }
    }
}

/// What kind of [`MeshTlsError`] this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MeshTlsErrorKind {
    /// A PEM input could not be read, or holds nothing usable.
    Pem,
    /// A certificate, the key or the CA was refused by rustls.
    Certificate,
    /// The identity name is not a DNS name, or the certificate is not valid for it.
    Identity,
}

/// Why a [`MeshTls`] could not be built, or a security identity could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MeshTlsError {
    /// The CA bundle is not PEM.
    #[error("the CA bundle is not valid PEM")]
    CaPem(#[source] pem::Error),
    /// The CA bundle holds no certificate.
    #[error("the CA bundle holds no certificate")]
    NoCaCertificate,
    /// A CA certificate was refused.
    #[error("a CA certificate was refused")]
    CaCertificate(#[source] rustls::Error),
    /// A verifier could not be built from the CA.
    #[error("the CA cannot verify certificates")]
    CaVerifier(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The node's certificate chain is not PEM.
    #[error("the node certificate chain is not valid PEM")]
    CertificatePem(#[source] pem::Error),
    /// The node's certificate chain holds no certificate.
    #[error("the node certificate chain holds no certificate")]
    NoCertificate,
    /// The node's private key is not PEM (PKCS#8, PKCS#1 or SEC1).
    #[error("the node private key is not valid PEM")]
    KeyPem(#[source] pem::Error),
    /// The certificate and key were refused together (e.g. the key does not match).
    #[error("the node certificate and key were refused")]
    CertificateKey(#[source] rustls::Error),
    /// The identity name is not a DNS name.
    #[error("{0:?} is not a DNS name")]
    IdentityName(String),
    /// The node's own certificate does not verify under the CA for its identity name.
    #[error("the node certificate is not valid for {name:?} under the configured CA")]
    IdentityNotCertified {
        /// The identity name.
        name: String,
        /// rustls' verdict.
        #[source]
        source: rustls::Error,
    },
    /// A descriptor's `securityIdentity` is neither `plaintext:…` nor `tls:{name}`.
    #[error("the security identity is neither plaintext nor tls")]
    UnknownIdentity,
}

impl MeshTlsError {
    /// The kind to branch on.
    pub fn kind(&self) -> MeshTlsErrorKind {
        match self {
            Self::CaPem(_)
            | Self::NoCaCertificate
            | Self::CertificatePem(_)
            | Self::NoCertificate
            | Self::KeyPem(_) => MeshTlsErrorKind::Pem,
            Self::CaCertificate(_) | Self::CaVerifier(_) | Self::CertificateKey(_) => {
                MeshTlsErrorKind::Certificate
            }
            Self::IdentityName(_) | Self::IdentityNotCertified { .. } | Self::UnknownIdentity => {
                MeshTlsErrorKind::Identity
            }
        }
    }
}

/// The TLS settings of a MeshNode's transport: the CA both ends are verified by, and this
/// node's certificate chain, key and identity name. Cheap to clone.
///
/// A node's certificate is presented both as a server certificate (to dialers) and as a
/// client certificate (when it dials), so it must be valid for TLS server authentication —
/// a certificate without an extended-key-usage extension, or with both `serverAuth` and
/// `clientAuth`.
#[derive(Clone)]
pub struct MeshTls {
    name: String,
    server: Arc<rustls::ServerConfig>,
    /// Verifies the peer for a known identity name.
    client: Arc<rustls::ClientConfig>,
    /// Verifies the CA chain only (no identity known yet).
    client_any_name: Arc<rustls::ClientConfig>,
    verifier: Arc<WebPkiServerVerifier>,
}

impl fmt::Debug for MeshTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MeshTls")
            .field("identity", &self.name)
            .finish_non_exhaustive()
    }
}

impl MeshTls {
    /// TLS settings from PEM: `ca_pem` the CA bundle every peer's certificate must chain to,
    /// `cert_pem` this node's chain (its certificate first), `key_pem` its private key, and
    /// `identity` the DNS name this node's certificate is valid for (published in its
    /// descriptor as `tls:{identity}`). Fails unless the certificate verifies under the CA for
    /// that name (spec 06 §23: incomplete TLS settings fail at startup).
    pub fn from_pem(
        ca_pem: &[u8],
        cert_pem: &[u8],
        key_pem: &[u8],
        identity: &str,
    ) -> Result<Self, MeshTlsError> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(MeshTlsError::CaPem)?;
            roots.add(cert).map_err(MeshTlsError::CaCertificate)?;
        }
        if roots.is_empty() {
            return Err(MeshTlsError::NoCaCertificate);
        }
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(MeshTlsError::CertificatePem)?;
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err(MeshTlsError::NoCertificate);
        };
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(MeshTlsError::KeyPem)?;
        let name = server_name(identity)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(roots);
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| MeshTlsError::CaVerifier(Arc::new(e)))?;
        verifier
            .verify_server_cert(leaf, intermediates, &name, &[], UnixTime::now())
            .map_err(|source| MeshTlsError::IdentityNotCertified {
                name: identity.to_owned(),
                source,
            })?;
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots, Arc::clone(&provider))
                .build()
                .map_err(|e| MeshTlsError::CaVerifier(Arc::new(e)))?;
        let server = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(MeshTlsError::CertificateKey)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(MeshTlsError::CertificateKey)?;
        let client = client_config(&provider, verifier.clone(), &chain, &key)?;
        let any_name = Arc::new(AnyName(Arc::clone(&verifier)));
        let client_any_name = client_config(&provider, any_name, &chain, &key)?;
        Ok(Self {
            name: identity.to_owned(),
            server: Arc::new(server),
            client: Arc::new(client),
            client_any_name: Arc::new(client_any_name),
            verifier,
        })
    }

    /// This node's identity (`tls:{name}`).
    pub fn identity(&self) -> SecurityIdentity {
        SecurityIdentity::Tls(self.name.clone())
    }

    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(Arc::clone(&self.server))
    }

    /// The connector and server name for a dial that expects `name` (or any CA-issued
    /// certificate when `None`).
    pub(crate) fn connector(
        &self,
        name: Option<&str>,
    ) -> Result<(tokio_rustls::TlsConnector, ServerName<'static>), MeshTlsError> {
        match name {
            Some(name) => Ok((
                tokio_rustls::TlsConnector::from(Arc::clone(&self.client)),
                server_name(name)?,
            )),
            // The name is not checked by `AnyName`; the CA chain is.
            None => Ok((
                tokio_rustls::TlsConnector::from(Arc::clone(&self.client_any_name)),
                server_name(&self.name)?,
            )),
        }
    }

    /// Whether the dialer's client certificate (already verified under the CA by the TLS
    /// handshake) is valid for `name`.
    pub(crate) fn peer_is(&self, certs: &[CertificateDer<'_>], name: &str) -> bool {
        let (Some((leaf, intermediates)), Ok(name)) = (certs.split_first(), server_name(name))
        else {
            return false;
        };
        self.verifier
            .verify_server_cert(leaf, intermediates, &name, &[], UnixTime::now())
            .is_ok()
    }
}

fn server_name(name: &str) -> Result<ServerName<'static>, MeshTlsError> {
    match ServerName::try_from(name.to_owned()) {
        Ok(n @ ServerName::DnsName(_)) => Ok(n),
        _ => Err(MeshTlsError::IdentityName(name.to_owned())),
    }
}

fn client_config(
    provider: &Arc<rustls::crypto::CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
) -> Result<rustls::ClientConfig, MeshTlsError> {
    rustls::ClientConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(MeshTlsError::CertificateKey)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain.to_vec(), key.clone_key())
        .map_err(MeshTlsError::CertificateKey)
}

/// Verifies the CA chain of a server certificate and accepts any name it is issued for (a
/// dial with no known identity). webpki checks the chain before the name, so a "not valid
/// for name" verdict means the chain verified.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
