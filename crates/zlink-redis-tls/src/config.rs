//! [`RedisTlsConfig`]: the trust anchors, client identity and server name of a TLS
//! (`rediss://`) connection, parsed and checked when built.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use fred::types::config::{Config, HostMapping, ServerConfig, TlsConfig, TlsHostMapping};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

use crate::refusal::{NoClientCertificate, Observer, ObservingVerifier};

/// Why TLS settings were rejected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsConfigError {
    /// The CA bundle is not well-formed PEM.
    #[error("the CA bundle is not well-formed PEM")]
    CaPem(#[source] pem::Error),
    /// The CA bundle holds no `CERTIFICATE` section.
    #[error("the CA bundle holds no certificate")]
    NoCaCertificate,
    /// A certificate of the CA bundle cannot be a trust anchor (not a parsable X.509
    /// certificate).
    #[error("a certificate of the CA bundle cannot be a trust anchor")]
    CaCertificate(#[source] rustls::Error),
    /// The client certificate chain is not well-formed PEM.
    #[error("the client certificate chain is not well-formed PEM")]
    ClientCertificatePem(#[source] pem::Error),
    /// The client certificate chain holds no `CERTIFICATE` section.
    #[error("the client certificate chain holds no certificate")]
    NoClientCertificate,
    /// The client private key is not well-formed PEM or holds no private key.
    #[error("the client private key is not well-formed PEM or holds no private key")]
    ClientKeyPem(#[source] pem::Error),
    /// The client key is unusable or does not belong to the client certificate.
    #[error("the client certificate and private key cannot be used together")]
    ClientIdentity(#[source] rustls::Error),
    /// The server name is neither a DNS name nor an IP address.
    #[error("`{name}` is not a DNS name or an IP address")]
    ServerName {
        /// The name given.
        name: String,
        /// Why it was refused.
        #[source]
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// The CA certificates cannot make a certificate verifier.
    #[error("the CA certificates cannot verify server certificates")]
    CaVerifier(#[source] rustls::client::VerifierBuilderError),
    /// The TLS library refused its own protocol configuration.
    #[error("the TLS protocol versions could not be configured")]
    Protocol(#[source] rustls::Error),
}

/// The broad cause of a [`TlsConfigError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsConfigErrorKind {
    /// The CA bundle.
    CaBundle,
    /// The client certificate or its private key.
    ClientIdentity,
    /// The server name.
    ServerName,
    /// The TLS library's own configuration.
    Protocol,
}

impl TlsConfigError {
    /// Which setting was rejected.
    pub fn kind(&self) -> TlsConfigErrorKind {
        match self {
            TlsConfigError::CaPem(_)
            | TlsConfigError::NoCaCertificate
            | TlsConfigError::CaCertificate(_)
            | TlsConfigError::CaVerifier(_) => TlsConfigErrorKind::CaBundle,
            TlsConfigError::ClientCertificatePem(_)
            | TlsConfigError::NoClientCertificate
            | TlsConfigError::ClientKeyPem(_)
            | TlsConfigError::ClientIdentity(_) => TlsConfigErrorKind::ClientIdentity,
            TlsConfigError::ServerName { .. } => TlsConfigErrorKind::ServerName,
            TlsConfigError::Protocol(_) => TlsConfigErrorKind::Protocol,
        }
    }
}

impl From<TlsConfigError> for zlink_store_spi::StoreError {
    /// A [`StoreError::Failure`](zlink_store_spi::StoreError::Failure) of kind
    /// [`FailureKind::Configuration`](zlink_store_spi::FailureKind::Configuration) whose source
    /// is the TLS error.
    fn from(e: TlsConfigError) -> Self {
        zlink_store_spi::StoreError::failure(zlink_store_spi::FailureKind::Configuration, e)
    }
}

/// TLS settings for the connection: the CA certificates the server's certificate must chain
/// to, optionally a client certificate and key (for servers started with
/// `--tls-auth-clients yes`), and optionally the name the server's certificate must carry.
///
/// Every input is parsed and checked when given: malformed PEM, a bundle without a
/// certificate, a key that does not match its certificate or an impossible server name are a
/// [`TlsConfigError`], never a panic or a failure at connection time. Only the CA bundle is
/// trusted (not the system trust store). TLS 1.2 and 1.3 are offered.
///
/// Without a server name the certificate is checked against the host each connection dials
/// (the URL's host or a cluster seed, and for nodes a Redis Cluster reports, their IP
/// address). With one, every connection, cluster nodes included, checks that name instead.
///
/// `Debug` shows neither certificates nor the key.
///
/// ```no_run
/// use zlink_redis_tls::RedisTlsConfig;
///
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let tls = RedisTlsConfig::from_ca_pem(&std::fs::read("ca.pem")?)?
///     .with_client_identity_pem(&std::fs::read("client.pem")?, &std::fs::read("client.key")?)?
///     .with_server_name("redis.internal")?;
/// // Then `RedisLocationOptions::with_tls_config(tls)` (or the Relocation Store's).
/// # let _ = tls;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisTlsConfig {
    roots: usize,
    provider: Arc<CryptoProvider>,
    verifier: Arc<WebPkiServerVerifier>,
    identity: Option<Arc<ClientIdentity>>,
    client: Arc<ClientConfig>,
    server_name: Option<String>,
}

struct ClientIdentity {
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl RedisTlsConfig {
    /// Trusts the certificates of a PEM bundle (one or more `CERTIFICATE` sections; text
    /// outside them is ignored), with no client certificate.
    pub fn from_ca_pem(ca_pem: &[u8]) -> Result<Self, TlsConfigError> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            let cert = cert.map_err(TlsConfigError::CaPem)?;
            roots.add(cert).map_err(TlsConfigError::CaCertificate)?;
        }
        if roots.is_empty() {
            return Err(TlsConfigError::NoCaCertificate);
        }
        // An explicit provider: the one fred's `enable-rustls-ring` feature uses, whatever
        // else the process installed as default.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let count = roots.len();
        let verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                .build()
                .map_err(TlsConfigError::CaVerifier)?;
        let client = Arc::new(build(&provider, &verifier, None, &Arc::default())?);
        Ok(RedisTlsConfig {
            roots: count,
            provider,
            verifier,
            identity: None,
            client,
            server_name: None,
        })
    }

    /// Presents a client certificate: `cert_pem` is the chain (the client's certificate
    /// first), `key_pem` its private key (PKCS#8, PKCS#1 or SEC1 PEM).
    pub fn with_client_identity_pem(
        self,
        cert_pem: &[u8],
        key_pem: &[u8],
    ) -> Result<Self, TlsConfigError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(TlsConfigError::ClientCertificatePem)?;
        if chain.is_empty() {
            return Err(TlsConfigError::NoClientCertificate);
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsConfigError::ClientKeyPem)?;
        let identity = Arc::new(ClientIdentity { chain, key });
        let client = build(
            &self.provider,
            &self.verifier,
            Some(&identity),
            &Arc::default(),
        )?;
        Ok(RedisTlsConfig {
            identity: Some(identity),
            client: Arc::new(client),
            ..self
        })
    }

    /// Checks the server's certificate against `name` (a DNS name or an IP address) instead
    /// of the host dialled.
    pub fn with_server_name(mut self, name: &str) -> Result<Self, TlsConfigError> {
        ServerName::try_from(name.to_owned()).map_err(|source| TlsConfigError::ServerName {
            name: name.to_owned(),
            source,
        })?;
        self.server_name = Some(name.to_owned());
        Ok(self)
    }

    /// How many CA certificates are trusted.
    pub fn ca_certificates(&self) -> usize {
        self.roots
    }

    /// Whether a client certificate is presented.
    pub fn has_client_identity(&self) -> bool {
        self.identity.is_some()
    }

    /// The server name certificates are checked against, if one was set.
    pub fn server_name(&self) -> Option<&str> {
        self.server_name.as_deref()
    }

    /// Turns TLS on in `config` with these settings, naming every configured server (for the
    /// providers' options).
    pub fn apply(&self, config: &mut Config) {
        let hostnames = match &self.server_name {
            Some(name) => TlsHostMapping::Custom(Arc::new(FixedName(name.clone()))),
            None => TlsHostMapping::None,
        };
        config.tls = Some(TlsConfig {
            connector: ClientConfig::clone(&self.client).into(),
            hostnames,
        });
        let name = self.server_name.as_deref();
        match &mut config.server {
            ServerConfig::Centralized { server } => {
                server.tls_server_name = name.map(Into::into);
            }
            ServerConfig::Clustered { hosts, .. } => {
                for server in hosts {
                    server.tls_server_name = name.map(Into::into);
                }
            }
            _ => {}
        }
    }
}

/// The rustls client configuration (the CA verifier, the client identity), its handshakes
/// recording refusals in `observer`.
fn build(
    provider: &Arc<CryptoProvider>,
    verifier: &Arc<WebPkiServerVerifier>,
    identity: Option<&ClientIdentity>,
    observer: &Arc<Observer>,
) -> Result<ClientConfig, TlsConfigError> {
    let builder = ClientConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()
        .map_err(TlsConfigError::Protocol)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ObservingVerifier {
            inner: Arc::clone(verifier),
            observer: Arc::clone(observer),
        }));
    match identity {
        Some(id) => builder
            .with_client_auth_cert(id.chain.clone(), id.key.clone_key())
            .map_err(TlsConfigError::ClientIdentity),
        None => {
            Ok(builder
                .with_client_cert_resolver(Arc::new(NoClientCertificate(Arc::clone(observer)))))
        }
    }
}

impl RedisTlsConfig {
    /// Gives `config` (on which these settings were applied) a connector of its own whose
    /// handshakes record why they were refused in the observer returned.
    pub fn observe(&self, config: &mut Config) -> Result<Arc<Observer>, TlsConfigError> {
        let observer = Arc::default();
        let client = build(
            &self.provider,
            &self.verifier,
            self.identity.as_deref(),
            &observer,
        )?;
        if let Some(tls) = config.tls.as_mut() {
            tls.connector = client.into();
        }
        Ok(observer)
    }
}

/// Names every Redis Cluster node by one server name.
#[derive(Debug)]
struct FixedName(String);

impl HostMapping for FixedName {
    fn map(&self, _ip: &IpAddr, _default_host: &str) -> Option<String> {
        Some(self.0.clone())
    }
}

impl fmt::Debug for RedisTlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTlsConfig")
            .field("ca_certificates", &self.roots)
            .field("client_identity", &self.identity.is_some())
            .field("server_name", &self.server_name)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Pki {
        ca_pem: String,
        leaf_pem: String,
        leaf_key_pem: String,
        other_key_pem: String,
    }

    fn pki() -> Pki {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("ca");
        let leaf_key = rcgen::KeyPair::generate().expect("key");
        let leaf = rcgen::CertificateParams::new(vec!["client".to_owned()])
            .expect("params")
            .signed_by(&leaf_key, &ca)
            .expect("leaf");
        Pki {
            ca_pem: ca.pem(),
            leaf_pem: leaf.pem(),
            leaf_key_pem: leaf_key.serialize_pem(),
            other_key_pem: rcgen::KeyPair::generate().expect("key").serialize_pem(),
        }
    }

    #[test]
    fn a_ca_bundle_and_a_matching_client_identity_are_accepted() {
        let p = pki();
        let bundle = format!("# comment\n{}\n{}", p.ca_pem, p.leaf_pem);
        let tls = RedisTlsConfig::from_ca_pem(bundle.as_bytes()).unwrap();
        assert_eq!(tls.ca_certificates(), 2);
        assert!(!tls.has_client_identity());
        let tls = tls
            .with_client_identity_pem(p.leaf_pem.as_bytes(), p.leaf_key_pem.as_bytes())
            .unwrap()
            .with_server_name("localhost")
            .unwrap()
            .with_server_name("127.0.0.1")
            .unwrap();
        assert!(tls.has_client_identity());
        assert_eq!(tls.server_name(), Some("127.0.0.1"));
        let debug = format!("{tls:?}");
        assert!(
            !debug.contains("PRIVATE") && !debug.contains("BEGIN"),
            "{debug}"
        );
    }

    #[test]
    fn malformed_or_empty_ca_bundles_are_typed_errors() {
        for (input, want) in [
            (&b""[..], "NoCaCertificate"),
            (b"not a certificate at all", "NoCaCertificate"),
            (
                b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
                "CaPem",
            ),
            (b"-----BEGIN CERTIFICATE-----\nAAAA\n", "CaPem"),
            (
                b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                "CaCertificate",
            ),
        ] {
            let e = RedisTlsConfig::from_ca_pem(input).unwrap_err();
            assert_eq!(e.kind(), TlsConfigErrorKind::CaBundle);
            assert!(format!("{e:?}").starts_with(want), "{want}: {e:?}");
        }
        // A key is not a certificate.
        let p = pki();
        let e = RedisTlsConfig::from_ca_pem(p.leaf_key_pem.as_bytes()).unwrap_err();
        assert!(matches!(e, TlsConfigError::NoCaCertificate), "{e:?}");
    }

    #[test]
    fn unusable_client_identities_are_typed_errors() {
        let p = pki();
        let tls = RedisTlsConfig::from_ca_pem(p.ca_pem.as_bytes()).unwrap();
        let cert = p.leaf_pem.as_bytes();
        let key = p.leaf_key_pem.as_bytes();
        let cases: [(&[u8], &[u8], &str); 5] = [
            (b"", key, "NoClientCertificate"),
            (
                b"-----BEGIN CERTIFICATE-----\n%%\n-----END CERTIFICATE-----\n",
                key,
                "ClientCertificatePem",
            ),
            (cert, b"", "ClientKeyPem"),
            (cert, cert, "ClientKeyPem"),
            (cert, p.other_key_pem.as_bytes(), "ClientIdentity"),
        ];
        for (cert, key, want) in cases {
            let e = tls.clone().with_client_identity_pem(cert, key).unwrap_err();
            assert_eq!(e.kind(), TlsConfigErrorKind::ClientIdentity);
            assert!(format!("{e:?}").starts_with(want), "{want}: {e:?}");
        }
    }

    #[test]
    fn impossible_server_names_are_typed_errors() {
        let p = pki();
        let tls = RedisTlsConfig::from_ca_pem(p.ca_pem.as_bytes()).unwrap();
        for bad in ["", "bad name", "a..b", "-"] {
            let e = tls.clone().with_server_name(bad).unwrap_err();
            assert_eq!(e.kind(), TlsConfigErrorKind::ServerName, "{bad:?}");
        }
    }

    #[test]
    fn a_tls_error_becomes_a_configuration_failure() {
        let e: zlink_store_spi::StoreError = TlsConfigError::NoCaCertificate.into();
        assert!(matches!(
            e,
            zlink_store_spi::StoreError::Failure {
                kind: zlink_store_spi::FailureKind::Configuration,
                source: Some(_),
            }
        ));
    }

    #[test]
    fn applying_names_every_server_and_turns_tls_on() {
        let p = pki();
        let tls = RedisTlsConfig::from_ca_pem(p.ca_pem.as_bytes())
            .unwrap()
            .with_server_name("redis.test")
            .unwrap();
        let mut config = Config {
            server: ServerConfig::new_clustered(vec![("127.0.0.1", 1), ("127.0.0.1", 2)]),
            ..Config::default()
        };
        tls.apply(&mut config);
        assert!(config.tls.is_some());
        let ServerConfig::Clustered { hosts, .. } = &config.server else {
            panic!("clustered");
        };
        assert!(
            hosts
                .iter()
                .all(|h| h.tls_server_name.as_deref() == Some("redis.test"))
        );
        let Some(TlsHostMapping::Custom(mapping)) = config.tls.as_ref().map(|t| &t.hostnames)
        else {
            panic!("a custom host mapping");
        };
        let mapped = mapping.map(&IpAddr::from([127, 0, 0, 1]), "x");
        assert_eq!(mapped.as_deref(), Some("redis.test"));
    }
}
