//! `wss://`: Python `websockets` over TLS (its `ssl` module trusting a CA
//! made here with the `openssl` CLI) against our acceptor over a
//! `spargio_tls::ServerTlsStream`, and our connector with a
//! `spargio_tls::TlsConnector` against a Python wss server.

mod common;

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{pattern, python, stdout_ok, PyServer};
use spargio::net::TcpListener;
use spargio_test_peers::{require_peer, Peer};
use spargio_tls::{TlsAcceptor, TlsConnector};
use spargio_ws::{CloseCode, Message, WsConnector, WsStreamExt};

/// A fresh directory with `ca.pem` and, signed by it, `leaf.pem` and
/// `leaf.key` for `localhost` and 127.0.0.1.
fn make_pki() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "spargio-ws-pki-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &dir,
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=spargio-ws test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        ]
        .concat(),
    );
    openssl(
        &dir,
        &[
            &["req"][..],
            &ec,
            &[
                "-keyout",
                "leaf.key",
                "-out",
                "leaf.csr",
                "-subj",
                "/CN=localhost",
            ],
        ]
        .concat(),
    );
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
    dir
}

fn openssl(dir: &Path, args: &[&str]) {
    spargio_test_peers::assert_present(Peer::Openssl);
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("spawn openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn python_client_over_tls_echoes_through_our_acceptor() {
    require_peer!(Peer::PythonWebsockets, Peer::Openssl);
    let pki = make_pki();
    let ca = pki.join("ca.pem").to_str().unwrap().to_owned();
    let acceptor = TlsAcceptor::from_pem_files(pki.join("leaf.pem"), pki.join("leaf.key")).unwrap();
    let (stdout, transport_was_tls) = common::run(move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let url = format!("wss://localhost:{}/", listener.local_addr().unwrap().port());
        let server = handle
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await?;
                let tls = acceptor.accept(tcp).await?;
                let mut ws = spargio_ws::accept(tls).await?;
                let tls = ws.get_ref().is_tls();
                while let Some(msg) = ws.recv().await? {
                    if msg.is_text() || msg.is_binary() {
                        ws.send_message(msg).await?;
                    }
                }
                Ok::<_, io::Error>(tls)
            })
            .unwrap();
        let client = std::thread::spawn(move || {
            python("client.py", &[&url, "echo"], &[("WS_CA", ca.as_str())])
        });
        let out = common::join(client).await;
        let tls = server.await.unwrap().unwrap();
        (stdout_ok(&out), tls)
    });
    assert_eq!(stdout.trim(), format!("OK {}", 2 * common::SIZES.len()));
    assert!(transport_was_tls);
    let _ = std::fs::remove_dir_all(pki);
}

#[test]
fn our_connector_over_tls_talks_to_a_python_wss_server() {
    require_peer!(Peer::PythonWebsockets, Peer::Openssl);
    let pki = make_pki();
    let cert = pki.join("leaf.pem");
    let key = pki.join("leaf.key");
    let server = PyServer::start(
        "echo_server.py",
        &[
            ("WS_CERT", cert.to_str().unwrap()),
            ("WS_KEY", key.to_str().unwrap()),
        ],
    );
    let url = format!("wss://localhost:{}/", server.port);
    let tls = TlsConnector::with_root_ca_pem_file(pki.join("ca.pem")).unwrap();
    common::run(move |handle| async move {
        let connector = WsConnector::new().with_tls(tls);
        let (mut ws, response) = connector.connect(&handle, url.as_str()).await.unwrap();
        assert_eq!(response.status(), 101);
        assert!(ws.get_ref().is_tls());
        let bytes = pattern(1 << 20);
        ws.send_message(Message::binary(bytes.clone()))
            .await
            .unwrap();
        match ws.recv().await.unwrap() {
            Some(Message::Binary(back)) => assert!(back[..] == bytes[..]),
            other => panic!("expected the binary echo, got {other:?}"),
        }
        ws.send_message(Message::text("over tls")).await.unwrap();
        assert_eq!(ws.recv().await.unwrap(), Some(Message::text("over tls")));
        let reply = ws.close_with(CloseCode::Normal, "tls bye").await.unwrap();
        assert_eq!(reply.map(|f| f.code), Some(CloseCode::Normal));

        // The default connector trusts the public roots, not our CA.
        let err = spargio_ws::connect(&handle, url.as_str())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    });
    let _ = std::fs::remove_dir_all(pki);
}
