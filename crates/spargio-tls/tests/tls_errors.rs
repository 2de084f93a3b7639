//! Errors a caller can match on: a certificate rustls rejects is
//! `InvalidData` on the client (unknown CA, wrong name, expired), a bad
//! server name `InvalidInput`, bad PEM `InvalidData`, a silent peer under
//! a timeout `TimedOut`.

mod common;

use std::io;
use std::time::{Duration, Instant};

use common::{pki, run_bounded, Pki};
use spargio::net::TcpListener;
use spargio_tls::{HandshakeOptions, TlsAcceptor, TlsConnector};

const LIMIT: Duration = Duration::from_secs(60);

/// Connects `connector` to an acceptor serving `server`'s leaf under
/// `name`; returns the client's error and the server's result.
fn handshake_error(server: &Pki, connector: TlsConnector, name: &'static str) -> io::Error {
    let acceptor =
        TlsAcceptor::from_pem(server.leaf_pem.as_bytes(), server.key_pem.as_bytes()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    run_bounded(LIMIT, move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                acceptor.accept(tcp).await.map(drop)
            })
            .unwrap();
        let err = connector
            .connect_socket_addr(&handle, addr, name)
            .await
            .unwrap_err();
        // The client's alert reaches the server: its accept fails too.
        assert!(server.await.unwrap().is_err());
        tx.send(err).unwrap();
    });
    rx.recv().unwrap()
}

fn certificate_error(err: &io::Error) -> String {
    let inner = err.get_ref().expect("the rustls error inside");
    let rustls = inner
        .downcast_ref::<spargio_tls::rustls::Error>()
        .expect("a rustls::Error");
    format!("{rustls:?}")
}

#[test]
fn unknown_ca_is_invalid_data() {
    let server = pki("unknown-ca-server", false);
    let other = pki("unknown-ca-other", false);
    let connector = TlsConnector::with_root_ca_pem(other.ca_pem.as_bytes()).unwrap();
    let err = handshake_error(&server, connector, "localhost");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(certificate_error(&err).contains("UnknownIssuer"), "{err:?}");
}

#[test]
fn wrong_name_is_invalid_data() {
    let server = pki("wrong-name", false);
    let connector = TlsConnector::with_root_ca_pem(server.ca_pem.as_bytes()).unwrap();
    let err = handshake_error(&server, connector, "example.com");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(
        certificate_error(&err).contains("NotValidForName"),
        "{err:?}"
    );
}

#[test]
fn expired_certificate_is_invalid_data() {
    let server = pki("expired", true);
    let connector = TlsConnector::with_root_ca_pem(server.ca_pem.as_bytes()).unwrap();
    let err = handshake_error(&server, connector, "localhost");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(certificate_error(&err).contains("Expired"), "{err:?}");
}

#[test]
fn bad_server_name_is_invalid_input_before_connecting() {
    run_bounded(LIMIT, |handle| async move {
        let connector = TlsConnector::with_webpki_roots();
        // Port 9 on a closed port would fail differently: the name is
        // checked first.
        let err = connector
            .connect_socket_addr(&handle, ([127, 0, 0, 1], 9).into(), "not a name!")
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    });
}

#[test]
fn bad_pem_is_invalid_data_and_missing_files_not_found() {
    let pki = pki("bad-pem", false);
    fn kind<T>(r: io::Result<T>) -> io::ErrorKind {
        r.map(drop).unwrap_err().kind()
    }
    assert_eq!(
        kind(TlsConnector::with_root_ca_pem(b"nothing here")),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        kind(TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), b"no key")),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        kind(TlsAcceptor::from_pem(b"no cert", pki.key_pem.as_bytes())),
        io::ErrorKind::InvalidData
    );
    // A key that is not the leaf's.
    let other = common::pki("bad-pem-other", false);
    assert_eq!(
        kind(TlsAcceptor::from_pem(
            pki.leaf_pem.as_bytes(),
            other.key_pem.as_bytes()
        )),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        kind(TlsAcceptor::from_pem_files(
            pki.dir.join("missing.pem"),
            &pki.key_file
        )),
        io::ErrorKind::NotFound
    );
    assert_eq!(
        kind(TlsConnector::with_root_ca_pem_file(
            pki.dir.join("missing.pem")
        )),
        io::ErrorKind::NotFound
    );
}

#[test]
fn connect_to_a_silent_server_times_out() {
    run_bounded(LIMIT, |handle| async move {
        // Accepts TCP (the kernel's backlog does) but never answers.
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connector = TlsConnector::with_webpki_roots();
        let options = HandshakeOptions::default().with_timeout(Duration::from_millis(200));
        let start = Instant::now();
        let err = spargio_tls::connect_socket_addr_with_options(
            &connector,
            &handle,
            addr,
            "localhost",
            options,
        )
        .await
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(start.elapsed() < Duration::from_secs(5));
        drop(listener);
    });
}
