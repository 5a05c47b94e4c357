//! A private `redis-server` child process on a free loopback port, for tests that must stop
//! and restart Redis (reconnect behaviour) without touching shared servers. No persistence
//! (`--save '' --appendonly no`): a restart starts empty.

use std::io;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// How long a started server may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A `redis-server` this process started; killed when dropped.
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    child: Option<Child>,
}

impl PrivateRedis {
    /// Starts `redis-server` (from `PATH`) on a free loopback port and waits until it accepts
    /// connections.
    pub async fn start() -> io::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut redis = PrivateRedis { port, child: None };
        redis.spawn().await?;
        Ok(redis)
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL) and waits until it has exited.
    pub async fn kill(&mut self) -> io::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// Pauses the server (SIGSTOP): it keeps its connections and data but answers nothing
    /// until [`resume`](Self::resume) (a hung Redis, as a stalled host or a long fork looks).
    pub async fn pause(&self) -> io::Result<()> {
        self.signal("-STOP").await
    }

    /// Resumes a [`pause`](Self::pause)d server (SIGCONT).
    pub async fn resume(&self) -> io::Result<()> {
        self.signal("-CONT").await
    }

    async fn signal(&self, signal: &str) -> io::Result<()> {
        let pid = self.child.as_ref().and_then(Child::id).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "redis-server is not running")
        })?;
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .await?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("kill {signal} {pid}: {status}")))
        }
    }

    /// Starts the server again on the same port (after [`kill`](Self::kill)) and waits until
    /// it accepts connections.
    pub async fn restart(&mut self) -> io::Result<()> {
        self.kill().await?;
        self.spawn().await
    }

    async fn spawn(&mut self) -> io::Result<()> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        loop {
            match tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await {
                Ok(_) => return Ok(()),
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }
}
