//! A QUIC echo server: every bidirectional stream is echoed back, every
//! datagram too.
//!
//! ```text
//! cargo run -p spargio-quic --example quic_echo_server -- [ADDR] [CERT_OUT]
//! ```
//!
//! It makes a self-signed certificate for `localhost` (rcgen) and writes
//! it (DER) to `CERT_OUT` (default `/tmp/spargio-quic-echo.der`) for
//! `quic_client` to trust. One driver per shard (`SO_REUSEPORT`); ALPN
//! `echo`.

use std::sync::Arc;

use spargio_quic::quinn::crypto::rustls::QuicServerConfig;
use spargio_quic::{quinn, QuicConnection, QuicEndpoint};

fn server_config(cert_out: &str) -> quinn::ServerConfig {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(cert_out, key.cert.der()).expect("write the certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![key.cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into()),
        )
        .unwrap();
    tls.alpn_protocols = vec![b"echo".to_vec()];
    quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()))
}

async fn serve(handle: spargio::RuntimeHandle, conn: QuicConnection) {
    let datagrams = conn.clone();
    handle
        .spawn_stealable(async move {
            while let Ok(d) = datagrams.read_datagram().await {
                let _ = datagrams.send_datagram(d);
            }
        })
        .unwrap();
    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
        handle
            .spawn_stealable(async move {
                // Echo chunk by chunk: works for streams of any length.
                while let Ok(Some(chunk)) = recv.read_chunk(64 * 1024).await {
                    if send.write_bytes(chunk).await.is_err() {
                        return;
                    }
                }
                let _ = send.finish();
            })
            .unwrap();
    }
    println!("{} closed: {}", conn.remote_address(), conn.closed().await);
}

#[spargio::main]
async fn main(handle: spargio::RuntimeHandle) -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:4433".into());
    let cert_out = args
        .next()
        .unwrap_or_else(|| "/tmp/spargio-quic-echo.der".into());
    let server = QuicEndpoint::server(
        &handle,
        addr.parse().expect("ADDR"),
        server_config(&cert_out),
    )?;
    println!(
        "listening on {} ({} drivers), certificate in {cert_out}",
        server.local_addr()?,
        server.drivers().len()
    );
    loop {
        let conn = server.accept().await?;
        println!("connection from {}", conn.remote_address());
        handle.spawn_stealable(serve(handle.clone(), conn)).unwrap();
    }
}
