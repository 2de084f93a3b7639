//! The bridge's endpoint: a `quinn::Endpoint` on the bridge runtime.

use std::io;
use std::net::SocketAddr;

use quinn_proto::{ClientConfig, ServerConfig, VarInt};

use super::{enter, spawn, BridgeConn};
use crate::error::{driver_closed, from_connect_error, from_connection_error};

pub(crate) struct BridgeEndpoint {
    ep: quinn::Endpoint,
}

impl BridgeEndpoint {
    pub(crate) fn bind(addr: SocketAddr, server: Option<ServerConfig>) -> io::Result<Self> {
        let _ctx = enter();
        let ep = match server {
            Some(config) => quinn::Endpoint::server(config, addr)?,
            None => quinn::Endpoint::client(addr)?,
        };
        Ok(BridgeEndpoint { ep })
    }

    pub(crate) fn from_quinn(ep: quinn::Endpoint) -> Self {
        BridgeEndpoint { ep }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.ep.local_addr()
    }

    pub(crate) fn set_server_config(&self, config: Option<ServerConfig>) {
        self.ep.set_server_config(config);
    }

    pub(crate) fn close(&self, code: VarInt, reason: &[u8]) {
        self.ep.close(code, reason);
    }

    pub(crate) fn shutdown(&self) {
        self.close(VarInt::from_u32(0), b"");
    }

    pub(crate) async fn wait_idle(&self) -> io::Result<()> {
        let ep = self.ep.clone();
        spawn(async move { ep.wait_idle().await }).await
    }

    pub(crate) async fn connect(
        &self,
        config: ClientConfig,
        addr: SocketAddr,
        server_name: &str,
    ) -> io::Result<BridgeConn> {
        let connecting = {
            let _ctx = enter();
            self.ep
                .connect_with(config, addr, server_name)
                .map_err(from_connect_error)?
        };
        let conn = spawn(connecting).await?.map_err(from_connection_error)?;
        Ok(BridgeConn::new(conn))
    }

    pub(crate) async fn accept(&self) -> io::Result<BridgeConn> {
        let ep = self.ep.clone();
        let conn = spawn(async move {
            loop {
                let incoming = ep.accept().await.ok_or_else(driver_closed)?;
                // A failed handshake is not the caller's error: wait for
                // the next client, as the native accept queue does.
                if let Ok(c) = incoming.await {
                    return Ok::<_, io::Error>(c);
                }
            }
        })
        .await??;
        Ok(BridgeConn::new(conn))
    }
}
