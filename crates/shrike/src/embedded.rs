//! The built-in test server, started in-process when `shrike run` is given no URL, so that the
//! first command a new user types benchmarks something real.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use shrike_server::ServerConfig;
use tokio::sync::oneshot;

/// A running in-process server; dropping it shuts the server down.
#[derive(Debug)]
pub struct EmbeddedServer {
    pub addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EmbeddedServer {
    /// Binds 127.0.0.1:0 and serves on one dedicated thread (the client's workers have their own).
    pub fn start() -> anyhow::Result<EmbeddedServer> {
        let config = ServerConfig::builder()
            .build()
            .map_err(|e| anyhow::anyhow!("built-in server configuration: {e}"))?;
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .context("cannot bind the built-in test server to 127.0.0.1:0")?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let (tx, rx) = oneshot::channel::<()>();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the built-in test server's runtime")?;
        let thread = std::thread::Builder::new()
            .name("shrike-embedded-server".into())
            .spawn(move || {
                shrike_timer::tighten_timer_slack();
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            crate::log::warning!("the built-in server failed to start: {e}");
                            return;
                        }
                    };
                    let shutdown = async {
                        let _ = rx.await;
                    };
                    if let Err(e) = shrike_server::run(listener, Arc::new(config), shutdown).await {
                        crate::log::warning!("the built-in server stopped with an error: {e}");
                    }
                });
            })
            .context("cannot start the built-in test server's thread")?;
        Ok(EmbeddedServer { addr, shutdown: Some(tx), thread: Some(thread) })
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
