//! A server certificate replaced while serving ([`CertReloader`]): the
//! acceptor's config resolves its certificate through a shared slot, so
//! every handshake that starts after a reload presents the new one, and
//! connections already up keep the one they were made with.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use crate::provider::{config_error, provider};
use crate::{pem, TlsAcceptor};

/// Replaces the certificate of the [`TlsAcceptor`] it came with
/// ([`TlsAcceptor::reloadable_from_pem`]). Cheap to clone; `Send + Sync`:
/// reload from a signal handler's task, a file watcher, an admin route.
///
/// ```no_run
/// # fn demo(cert: &[u8], key: &[u8], renewed_cert: &[u8], renewed_key: &[u8]) -> std::io::Result<()> {
/// let (acceptor, reloader) = spargio_tls::TlsAcceptor::reloadable_from_pem(cert, key)?;
/// // serve with `acceptor`; later, when the certificate is renewed:
/// reloader.reload_pem(renewed_cert, renewed_key)?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CertReloader {
    slot: Arc<Slot>,
}

/// The current certificate; read by every handshake, written by reloads.
struct Slot {
    current: RwLock<Arc<CertifiedKey>>,
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertSlot").finish_non_exhaustive()
    }
}

impl fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertReloader").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for Slot {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        // A writer that panicked left a whole `Arc` in place: the guard's
        // poison carries no broken state.
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// The chain and key as rustls signs with them; `InvalidData` if either
/// does not parse or the key is not the leaf's.
fn certified(cert_chain_pem: &[u8], key_pem: &[u8]) -> io::Result<Arc<CertifiedKey>> {
    let certs = pem::certs(cert_chain_pem)?;
    let key = pem::private_key(key_pem)?;
    CertifiedKey::from_der(certs, key, &*provider()?)
        .map(Arc::new)
        .map_err(|e| pem::invalid(format!("certificate and key rejected: {e}")))
}

impl CertReloader {
    /// From now on, handshakes present the chain in `cert_chain_pem`
    /// (leaf first) with `key_pem`. On error (`InvalidData`: a chain or
    /// key that does not parse, a key that is not the leaf's) the
    /// certificate in use stays.
    pub fn reload_pem(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> io::Result<()> {
        let next = certified(cert_chain_pem, key_pem)?;
        *self.slot.current.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    /// [`reload_pem`](CertReloader::reload_pem) from files.
    pub fn reload_pem_files(
        &self,
        cert_chain_path: impl AsRef<Path>,
        key_path: impl AsRef<Path>,
    ) -> io::Result<()> {
        self.reload_pem(
            &pem::read(cert_chain_path.as_ref())?,
            &pem::read(key_path.as_ref())?,
        )
    }
}

impl TlsAcceptor {
    /// [`from_pem`](TlsAcceptor::from_pem), with a [`CertReloader`] that
    /// replaces the certificate while the acceptor serves.
    pub fn reloadable_from_pem(
        cert_chain_pem: &[u8],
        key_pem: &[u8],
    ) -> io::Result<(TlsAcceptor, CertReloader)> {
        let slot = Arc::new(Slot {
            current: RwLock::new(certified(cert_chain_pem, key_pem)?),
        });
        let config = ServerConfig::builder_with_provider(provider()?)
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_no_client_auth()
            .with_cert_resolver(slot.clone());
        Ok((TlsAcceptor::new(Arc::new(config)), CertReloader { slot }))
    }

    /// [`reloadable_from_pem`](TlsAcceptor::reloadable_from_pem) from files.
    pub fn reloadable_from_pem_files(
        cert_chain_path: impl AsRef<Path>,
        key_path: impl AsRef<Path>,
    ) -> io::Result<(TlsAcceptor, CertReloader)> {
        TlsAcceptor::reloadable_from_pem(
            &pem::read(cert_chain_path.as_ref())?,
            &pem::read(key_path.as_ref())?,
        )
    }
}
