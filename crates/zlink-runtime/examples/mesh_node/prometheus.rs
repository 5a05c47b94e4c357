//! `--metrics ADDR`: installs the Prometheus recorder (`metrics-exporter-prometheus`) as the
//! process's global recorder and answers every HTTP `GET` on `ADDR` with the rendered text
//! (`docs/metrics.md`). The exporter's own HTTP listener is not used: this small loop keeps
//! the HTTP stack out of the build and reports the bound address (port 0 works).
//!
//! Install it **before** building the root: the runtime resolves its per-message handles
//! when its nodes are built. `cargo xtask` includes this same file (`demo --metrics`,
//! `bench objects --metrics`), so the glue exists once.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Histogram buckets in seconds (every runtime histogram is a duration).
pub(crate) const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// How often the recorder drains histogram samples when nobody scrapes.
const UPKEEP: Duration = Duration::from_secs(5);

/// The largest request head read before answering.
const MAX_REQUEST: usize = 8 * 1024;

/// A Prometheus recorder with the runtime's buckets (not installed).
pub(crate) fn recorder() -> PrometheusRecorder {
    PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .map(PrometheusBuilder::build_recorder)
        .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder())
}

/// Installs the Prometheus recorder globally and serves it on `addr`; returns the bound
/// address. Needs a Tokio runtime.
pub(crate) async fn install_and_serve(addr: &str) -> Result<SocketAddr, String> {
    let recorder = recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder)
        .map_err(|e| format!("a metrics recorder is already installed: {e}"))?;
    serve(addr, handle).await
}

/// Serves `handle`'s text on `addr` (every request gets the whole text) and runs its upkeep.
pub(crate) async fn serve(addr: &str, handle: PrometheusHandle) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics {addr}: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--metrics {addr}: {e}"))?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP).await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(async move {
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let handle = handle.clone();
            tokio::spawn(async move {
                if let Err(e) = answer(stream, &handle).await {
                    tracing::debug!(error = %e, "metrics endpoint: request failed");
                }
            });
        }
    });
    Ok(bound)
}

/// Reads one request head (bounded, 5 s) and writes the rendered metrics.
async fn answer(
    mut stream: tokio::net::TcpStream,
    handle: &PrometheusHandle,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let read = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let body = handle.render();
    let response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
