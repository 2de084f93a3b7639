//! Test certificates and the TLS/QUIC configs both sides build from them.
//!
//! One [`TestCerts`] holds a CA and a leaf it signed for `localhost` and
//! `127.0.0.1` (ECDSA P-256, made by rcgen at test start). The quinn peers
//! take their configs from the helpers here; the spargio side of a test
//! builds its own configs from the same DER ([`TestCerts::cert_chain_der`],
//! [`TestCerts::key_der`], [`TestCerts::ca_der`]); the Python peers read
//! the PEM files [`TestCerts::write_pem_files`] writes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The server name every test connects to (the leaf also covers `127.0.0.1`).
pub const SERVER_NAME: &str = "localhost";

/// The ALPN protocol the tests use unless they test ALPN itself.
pub const ALPN: &[u8] = b"spargio-test";

/// A CA and a leaf certificate it signed for `localhost` and `127.0.0.1`.
#[derive(Clone, Debug)]
pub struct TestCerts {
    ca_der: CertificateDer<'static>,
    ca_pem: String,
    leaf_der: CertificateDer<'static>,
    leaf_pem: String,
    key_pkcs8: Vec<u8>,
    key_pem: String,
}

impl TestCerts {
    /// Makes a fresh CA and leaf.
    pub fn generate() -> TestCerts {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "spargio-quic test CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().expect("CA key");
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
        let issuer = Issuer::new(ca_params, ca_key);

        let mut leaf_params =
            CertificateParams::new(vec![SERVER_NAME.to_string(), "127.0.0.1".to_string()])
                .expect("leaf params");
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, SERVER_NAME);
        leaf_params.use_authority_key_identifier_extension = true;
        leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf_params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf = leaf_params
            .signed_by(&leaf_key, &issuer)
            .expect("leaf certificate");

        TestCerts {
            ca_der: ca.der().clone(),
            ca_pem: ca.pem(),
            leaf_der: leaf.der().clone(),
            leaf_pem: leaf.pem(),
            key_pkcs8: leaf_key.serialize_der(),
            key_pem: leaf_key.serialize_pem(),
        }
    }

    /// The server's chain as it is sent: the leaf only.
    pub fn cert_chain_der(&self) -> Vec<CertificateDer<'static>> {
        vec![self.leaf_der.clone()]
    }

    /// The leaf's private key (PKCS#8).
    pub fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_pkcs8.clone()))
    }

    /// The CA certificate a client trusts.
    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.ca_der.clone()
    }

    /// The leaf certificate in PEM.
    pub fn cert_pem(&self) -> &str {
        &self.leaf_pem
    }

    /// The leaf's private key in PEM (PKCS#8).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The CA certificate in PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A root store holding only the test CA.
    pub fn root_store(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der()).expect("CA into root store");
        roots
    }

    /// A rustls server config for QUIC: TLS 1.3 only, ring provider,
    /// the leaf and key, `alpn` as the offered protocols.
    pub fn rustls_server_config(&self, alpn: &[&[u8]]) -> rustls::ServerConfig {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_no_client_auth()
            .with_single_cert(self.cert_chain_der(), self.key_der())
            .expect("server certificate");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }

    /// A rustls client config for QUIC: TLS 1.3 only, ring provider,
    /// trusting the test CA, `alpn` as the offered protocols.
    pub fn rustls_client_config(&self, alpn: &[&[u8]]) -> rustls::ClientConfig {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_root_certificates(self.root_store())
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }

    /// A quinn server config: [`transport`]`(idle_timeout)` and the
    /// rustls config above.
    pub fn quinn_server_config(
        &self,
        alpn: &[&[u8]],
        idle_timeout: Option<Duration>,
    ) -> quinn::ServerConfig {
        let crypto = QuicServerConfig::try_from(self.rustls_server_config(alpn))
            .expect("QUIC server crypto");
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(Arc::new(transport(idle_timeout)));
        config
    }

    /// A quinn client config: [`transport`]`(idle_timeout)` and the
    /// rustls config above.
    pub fn quinn_client_config(
        &self,
        alpn: &[&[u8]],
        idle_timeout: Option<Duration>,
    ) -> quinn::ClientConfig {
        let crypto = QuicClientConfig::try_from(self.rustls_client_config(alpn))
            .expect("QUIC client crypto");
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(Arc::new(transport(idle_timeout)));
        config
    }

    /// Writes `cert.pem` (the leaf), `key.pem` and `ca.pem` into a fresh
    /// directory removed when the returned value drops.
    pub fn write_pem_files(&self) -> PemFiles {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only uniqueness of the number matters.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("spargio-quic-certs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("cert dir");
        let files = PemFiles { dir };
        std::fs::write(files.cert(), &self.leaf_pem).expect("cert.pem");
        std::fs::write(files.key(), &self.key_pem).expect("key.pem");
        std::fs::write(files.ca(), &self.ca_pem).expect("ca.pem");
        files
    }
}

/// PEM files of a [`TestCerts`] in a temporary directory, removed on drop.
#[derive(Debug)]
pub struct PemFiles {
    dir: PathBuf,
}

impl PemFiles {
    /// The leaf certificate.
    pub fn cert(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    /// The leaf's key.
    pub fn key(&self) -> PathBuf {
        self.dir.join("key.pem")
    }

    /// The CA certificate.
    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PemFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The transport settings every quinn peer uses: quinn's defaults
/// (datagrams on, with quinn's default receive buffer) and `idle_timeout`
/// (`None`: no idle timeout on this side).
pub fn transport(idle_timeout: Option<Duration>) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    let idle = idle_timeout.map(|d| quinn::IdleTimeout::try_from(d).expect("idle timeout range"));
    transport.max_idle_timeout(idle);
    transport
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
