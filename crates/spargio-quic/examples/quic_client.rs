//! A QUIC client for `quic_echo_server`: sends a message on a stream and
//! as a datagram, prints what comes back.
//!
//! ```text
//! cargo run -p spargio-quic --example quic_client -- [ADDR] [CERT] [MESSAGE]
//! ```
//!
//! `CERT` is the DER certificate the server wrote (default
//! `/tmp/spargio-quic-echo.der`).

use std::sync::Arc;

use bytes::Bytes;
use spargio_quic::quinn::crypto::rustls::QuicClientConfig;
use spargio_quic::{quinn, QuicEndpoint};

fn client_config(cert: &str) -> quinn::ClientConfig {
    let der = std::fs::read(cert).expect("read the server's certificate");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from(der))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"echo".to_vec()];
    quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

#[spargio::main]
async fn main(handle: spargio::RuntimeHandle) -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:4433".into());
    let cert = args
        .next()
        .unwrap_or_else(|| "/tmp/spargio-quic-echo.der".into());
    let message = args
        .next()
        .unwrap_or_else(|| "hello from spargio-quic".into());

    let client = QuicEndpoint::client(&handle, "0.0.0.0:0".parse().unwrap())?;
    client.set_default_client_config(client_config(&cert));
    let conn = client
        .connect(addr.parse().expect("ADDR"), "localhost")
        .await?;
    println!("connected to {addr}, rtt {:?}", conn.stats().path.rtt);

    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(message.as_bytes()).await?;
    send.finish()?;
    let echoed = recv.read_to_end(1 << 20).await?;
    println!("stream echo: {}", String::from_utf8_lossy(&echoed));

    if conn.max_datagram_size().is_some() {
        conn.send_datagram(Bytes::from(message.clone()))?;
        let d = conn.read_datagram().await?;
        println!("datagram echo: {}", String::from_utf8_lossy(&d));
    }
    conn.close(0, b"bye");
    client.wait_idle().await?;
    Ok(())
}
