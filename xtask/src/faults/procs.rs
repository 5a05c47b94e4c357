//! The real OS processes of a fault run: a private `redis-server` on a free loopback port and
//! `mesh_node` example processes driven over stdin, each signalled from outside (`kill -9`,
//! SIGSTOP / SIGCONT).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::services;

/// Sends `signal` (`KILL`, `STOP`, `CONT`) to process `pid`.
pub(crate) fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid} failed ({status})"))
    }
}

/// A `redis-server` of the run's own, on a free loopback port, in a fresh directory.
pub(crate) struct Redis {
    port: u16,
    dir: PathBuf,
    aof: bool,
    child: Option<Child>,
}

impl Redis {
    /// Starts a server with append-only persistence (`appendfsync always`) or with none.
    pub(crate) fn start(aof: bool) -> Result<Redis, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let dir = std::env::temp_dir()
            .join("zlink-faults")
            .join(format!("redis-{port}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut redis = Redis {
            port,
            dir,
            aof,
            child: None,
        };
        redis.spawn()?;
        Ok(redis)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let port = self.port.to_string();
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port, "--bind", "127.0.0.1", "--save", ""]);
        if self.aof {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        cmd.arg("--dir").arg(&self.dir);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        self.child = Some(child);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if services::ping(self.port) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("redis-server on port {} did not answer", self.port))
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `kill -9` and wait for the exit.
    pub(crate) fn kill(&mut self) -> Result<(), String> {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), "KILL")?;
            let _ = child.wait();
        }
        Ok(())
    }

    /// Starts the server again on the same port and directory (AOF replayed when on).
    pub(crate) fn restart(&mut self) -> Result<(), String> {
        self.spawn()
    }

    /// Runs `redis-cli` against the server.
    pub(crate) fn cli(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// How many clients are connected now, not counting the `redis-cli` that asks.
    pub(crate) fn clients(&self) -> Result<u64, String> {
        let info = self.cli(&["INFO", "clients"])?;
        info.lines()
            .find_map(|l| l.strip_prefix("connected_clients:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .map(|n| n.saturating_sub(1))
            .ok_or_else(|| format!("INFO clients answered `{info}`"))
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = signal(child.id(), "CONT");
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How many node logs this run opened (their file names).
static NODE_LOGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One `mesh_node` process: its stdin, and its stdout lines on a channel.
pub(crate) struct Node {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The node's routing id (hex), from its `READY` line.
    pub(crate) rid: String,
}

impl Node {
    /// Starts `binary` with `args` and waits (up to `ready_within`) for its `READY` line.
    pub(crate) fn start(
        binary: &Path,
        args: &[String],
        ready_within: Duration,
    ) -> Result<Node, String> {
        let mut cmd = Command::new(binary);
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped());
        // `ZLINK_FAULTS_LOG_DIR`: each node's log (`RUST_LOG`, default `info`) in a file there.
        match std::env::var_os("ZLINK_FAULTS_LOG_DIR") {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                let n = NODE_LOGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let path = dir.join(format!("node-{}-{n}.log", std::process::id()));
                let file =
                    std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let level = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
                cmd.env("RUST_LOG", level).stderr(file);
            }
            None => {
                cmd.env("RUST_LOG", "error").stderr(Stdio::null());
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("mesh_node has no stdout")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut node = Node {
            child,
            stdin,
            lines,
            rid: String::new(),
        };
        let ready = node.wait_for(ready_within, |l| l.starts_with("READY "))?;
        node.rid = ready
            .split_whitespace()
            .nth(1)
            .ok_or("a READY line without a routing id")?
            .to_owned();
        Ok(node)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends one command line.
    pub(crate) fn send(&mut self, line: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("the node's stdin is closed")?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot write to mesh_node: {e}"))
    }

    /// Waits up to `limit` for a line matching `done`, dropping the others.
    pub(crate) fn wait_for(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&str) -> bool,
    ) -> Result<String, String> {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if done(&line) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no expected line within {limit:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("mesh_node ended before the expected line".into());
                }
            }
        }
    }

    /// Collects every line until one matches `done` (included), up to `limit`.
    pub(crate) fn collect_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&str) -> bool,
    ) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let last = done(&line);
                    out.push(line);
                    if last {
                        return Ok(out);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no closing line within {limit:?}"));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("mesh_node ended before its closing line".into());
                }
            }
        }
    }

    /// `QUIT`, and the `STOPPED <outcome>` line it ends with.
    pub(crate) fn quit(&mut self, limit: Duration) -> Result<String, String> {
        self.send("QUIT")?;
        let line = self.wait_for(limit, |l| l.starts_with("STOPPED"))?;
        self.stdin = None;
        let _ = self.child.wait();
        Ok(line)
    }

    /// `kill -9` and wait for the exit.
    pub(crate) fn kill(&mut self) -> Result<(), String> {
        signal(self.pid(), "KILL")?;
        let _ = self.child.wait();
        Ok(())
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = signal(self.child.id(), "CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
