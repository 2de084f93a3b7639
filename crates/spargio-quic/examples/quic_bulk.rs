//! Bulk transfer over one native connection on loopback, with MiB/s and
//! the process's CPU time: `cargo run --release --example quic_bulk --
//! [MiB] [--no-offload] [--connections N]`.
//!
//! Both endpoints run in this process on a 2-shard runtime (server: one
//! driver per shard; client: one driver). The certificate is self-signed
//! (rcgen) and trusted by the client.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use spargio_quic::quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use spargio_quic::{quinn, QuicEndpoint, QuicEndpointOptions};

fn configs() -> (quinn::ServerConfig, quinn::ClientConfig) {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = key.cert.der().clone();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into()),
        )
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (
        quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(server).unwrap())),
        quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(client).unwrap())),
    )
}

fn cpu_seconds() -> f64 {
    // /proc/self/stat fields 14 and 15: utime and stime in clock ticks.
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(512);
    let offload = !args.iter().any(|a| a == "--no-offload");
    let conns: usize = args
        .iter()
        .position(|a| a == "--connections")
        .map(|i| args[i + 1].parse().unwrap())
        .unwrap_or(1);
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let handle = rt.handle();
    let (server_config, client_config) = configs();
    let options = QuicEndpointOptions::default().with_segmentation_offload(offload);
    let server = QuicEndpoint::server_with_options(
        &handle,
        "127.0.0.1:0".parse().unwrap(),
        server_config,
        options.clone(),
    )
    .unwrap();
    let addr = server.local_addr().unwrap();
    let server_drivers = server.drivers().to_vec();
    let h = handle.clone();
    handle
        .spawn_stealable(async move {
            while let Ok(conn) = server.accept().await {
                h.spawn_stealable(async move {
                    let mut recv = conn.accept_uni().await.unwrap();
                    let mut n = 0usize;
                    while let Some(c) = recv.read_chunk(usize::MAX).await.unwrap() {
                        n += c.len();
                    }
                    let mut back = conn.open_uni().await.unwrap();
                    back.write_all(&(n as u64).to_le_bytes()).await.unwrap();
                    back.finish().unwrap();
                    conn.closed().await;
                })
                .unwrap();
            }
        })
        .unwrap();

    let per_conn = mib * 1024 * 1024 / conns;
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..conns {
        let h = handle.clone();
        let cfg = client_config.clone();
        let options = options.clone();
        tasks.push(
            handle
                .spawn_pinned(i % 2, async move {
                    let ep = QuicEndpoint::client_with_options(
                        &h,
                        "127.0.0.1:0".parse().unwrap(),
                        options,
                    )
                    .unwrap();
                    ep.set_default_client_config(cfg);
                    let conn = ep.connect(addr, "localhost").await.unwrap();
                    let mut send = conn.open_uni().await.unwrap();
                    let chunk = Bytes::from(vec![7u8; 256 * 1024]);
                    let mut left = per_conn;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        send.write_bytes(chunk.slice(..n)).await.unwrap();
                        left -= n;
                    }
                    send.finish().unwrap();
                    let mut ack = conn.accept_uni().await.unwrap();
                    let got = ack.read_to_end(8).await.unwrap();
                    assert_eq!(u64::from_le_bytes(got.try_into().unwrap()), per_conn as u64);
                    let stats = ep.drivers()[0].stats();
                    conn.close(0, b"");
                    stats
                })
                .unwrap(),
        );
    }
    let mut sends = 0;
    let mut sent = 0;
    for t in tasks {
        let s = spargio::block_on(t).unwrap();
        if std::env::var_os("QUIC_BULK_STATS").is_some() {
            eprintln!("client driver: {s:?}");
        }
        sends += s.send_ops;
        sent += s.datagrams_sent;
    }
    if std::env::var_os("QUIC_BULK_STATS").is_some() {
        for d in &server_drivers {
            eprintln!("server driver: {:?} {:?}", d.probe(), d.stats());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{conns} connection(s), {mib} MiB, offload {offload}: {:.0} MiB/s, {:.2} s, CPU {:.2} s ({:.0}% of one core), client datagrams {sent} in {sends} sends",
        mib as f64 / secs,
        secs,
        cpu,
        100.0 * cpu / secs
    );
}
