//! The config helpers (`server_config_from_pem`,
//! `client_config_with_root_ca_pem`, the DER and file forms, webpki
//! roots): a handshake and a stream round trip with configs built only
//! from PEM/DER, and the errors bad input gives.

mod common;
mod support;

use std::io;

use spargio::RuntimeHandle;
use spargio_quic::{
    client_config_with_root_ca_pem, client_config_with_root_ca_pem_file,
    client_config_with_webpki_roots, server_config_from_der, server_config_from_pem,
    server_config_from_pem_files, QuicEndpoint,
};

use common::*;
use support::*;

/// Echoes one bi stream on `server`'s next connection.
fn echo_once(handle: &RuntimeHandle, server: QuicEndpoint) {
    handle
        .spawn_stealable(async move {
            let conn = server.accept().await?;
            let (mut send, mut recv) = conn.accept_bi().await?;
            let data = recv.read_to_end(1 << 20).await?;
            send.write_all(&data).await?;
            send.finish()?;
            conn.closed().await;
            io::Result::Ok(())
        })
        .unwrap();
}

async fn round_trip(
    handle: &RuntimeHandle,
    server_config: spargio_quic::quinn::ServerConfig,
    client_config: spargio_quic::quinn::ClientConfig,
) {
    let server = QuicEndpoint::server(handle, localhost(), server_config).unwrap();
    let addr = server.local_addr().unwrap();
    echo_once(handle, server);
    let client = QuicEndpoint::client(handle, localhost()).unwrap();
    client.set_default_client_config(client_config);
    let conn = hang("connect", client.connect(addr, SERVER_NAME))
        .await
        .unwrap();
    assert_eq!(conn.alpn().as_deref(), Some(ALPN));
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let msg = pattern(30_000, 5);
    send.write_all(&msg).await.unwrap();
    send.finish().unwrap();
    assert_eq!(hang("echo", recv.read_to_end(1 << 20)).await.unwrap(), msg);
    conn.close(0, b"done");
}

#[spargio::test(shards = 2)]
async fn pem_configs_handshake_and_round_trip(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server_config = server_config_from_pem(
        certs.cert_pem().as_bytes(),
        certs.key_pem().as_bytes(),
        &[ALPN],
    )
    .unwrap();
    let client_config = client_config_with_root_ca_pem(certs.ca_pem().as_bytes(), &[ALPN]).unwrap();
    round_trip(&handle, server_config, client_config).await;
}

#[spargio::test(shards = 2)]
async fn der_and_file_configs_handshake_and_round_trip(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server_config =
        server_config_from_der(certs.cert_chain_der(), certs.key_der(), &[ALPN]).unwrap();
    let files = certs.write_pem_files();
    let client_config = client_config_with_root_ca_pem_file(files.ca(), &[ALPN]).unwrap();
    round_trip(&handle, server_config, client_config).await;

    let server_config = server_config_from_pem_files(files.cert(), files.key(), &[ALPN]).unwrap();
    let client_config = client_config_with_root_ca_pem(certs.ca_pem().as_bytes(), &[ALPN]).unwrap();
    round_trip(&handle, server_config, client_config).await;
}

/// The webpki-roots config verifies: it does not trust the test CA.
#[spargio::test(shards = 2)]
async fn webpki_roots_reject_an_untrusted_server(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server_config = server_config_from_pem(
        certs.cert_pem().as_bytes(),
        certs.key_pem().as_bytes(),
        &[ALPN],
    )
    .unwrap();
    let server = QuicEndpoint::server(&handle, localhost(), server_config).unwrap();
    let addr = server.local_addr().unwrap();
    let client = QuicEndpoint::client(&handle, localhost()).unwrap();
    client.set_default_client_config(client_config_with_webpki_roots(&[ALPN]));
    // The server's driver runs the handshake; no `accept` needed.
    let res = hang("connect", client.connect(addr, SERVER_NAME)).await;
    let err = res.expect_err("an untrusted certificate must fail the handshake");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    assert!(format!("{err}").contains("UnknownIssuer"), "{err}");
}

#[test]
fn bad_pem_is_invalid_data() {
    let certs = TestCerts::generate();
    let kind = |r: io::Result<_>| r.map(|_: ()| ()).unwrap_err().kind();
    assert_eq!(
        kind(server_config_from_pem(b"junk", certs.key_pem().as_bytes(), &[ALPN]).map(|_| ())),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        kind(server_config_from_pem(certs.cert_pem().as_bytes(), b"junk", &[ALPN]).map(|_| ())),
        io::ErrorKind::InvalidData
    );
    // A key that does not match the leaf.
    let other = TestCerts::generate();
    assert_eq!(
        kind(
            server_config_from_pem(
                certs.cert_pem().as_bytes(),
                other.key_pem().as_bytes(),
                &[ALPN]
            )
            .map(|_| ())
        ),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        kind(client_config_with_root_ca_pem(b"", &[ALPN]).map(|_| ())),
        io::ErrorKind::InvalidData
    );
    assert_eq!(
        kind(client_config_with_root_ca_pem_file("/nonexistent/ca.pem", &[ALPN]).map(|_| ())),
        io::ErrorKind::NotFound
    );
}
