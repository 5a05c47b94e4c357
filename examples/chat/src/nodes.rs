//! The demo's node processes: children of this very binary (`zlink-chat node`), read line by
//! line (see `node.rs` for what they print). Every wait has a deadline, and a child is killed
//! when its [`NodeProcess`] is dropped — on any failure of the demo, none outlives it.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::{Instant, timeout_at};

/// How long a node may take from its start to its `READY` line.
const START_WITHIN: Duration = Duration::from_secs(60);
/// How long a node may take from SIGTERM to its exit (its Relocate deadline is 30 s, then a
/// shutdown).
const LEAVE_WITHIN: Duration = Duration::from_secs(75);
/// How long a node may take from the end of its stdin to its exit (the shutdown deadline is
/// 30 s).
const STOP_WITHIN: Duration = Duration::from_secs(45);

/// One running `zlink-chat node` child.
pub(crate) struct NodeProcess {
    /// `node-1`, `node-2`, …
    pub(crate) name: String,
    /// Its process id.
    pub(crate) pid: u32,
    /// Its MeshNode's routing id (as text), from its `READY` line.
    pub(crate) rid: String,
    /// The child, killed on drop (`kill_on_drop`): the guard.
    child: Child,
    /// Its stdout, line by line.
    lines: Lines<BufReader<ChildStdout>>,
}

/// What a leaving node reported: its host Relocate's result and its shutdown's.
pub(crate) struct Left {
    /// `Relocated` or `Blocked` (or `Refused`).
    pub(crate) outcome: String,
    /// Why it was blocked (`None` when relocated).
    pub(crate) reason: String,
    /// Objects moved.
    pub(crate) moved: u64,
    /// Objects still on the node when the Relocate ended.
    pub(crate) remaining: u64,
    /// The shutdown's outcome (`Stopped` or `ForceStopped`).
    pub(crate) stopped: String,
}

/// Starts `count` nodes on `redis` under `prefix` and waits until each printed `READY`.
pub(crate) async fn start_all(
    count: usize,
    redis: &str,
    prefix: &str,
) -> Result<Vec<NodeProcess>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut nodes = Vec::with_capacity(count);
    for i in 1..=count {
        let mut child = Command::new(&exe)
            .args(["node", "--redis", redis, "--prefix", prefix])
            .stdin(Stdio::piped()) // its end stops the node
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()) // its logs (RUST_LOG, default warn)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start node-{i}: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        nodes.push(NodeProcess {
            name: format!("node-{i}"),
            pid: child.id().unwrap_or_default(),
            rid: String::new(),
            child,
            lines: BufReader::new(stdout).lines(),
        });
    }
    let deadline = Instant::now() + START_WITHIN;
    for node in &mut nodes {
        let line = node.line_starting("READY", deadline).await?;
        node.rid = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
    }
    Ok(nodes)
}

impl NodeProcess {
    /// Reads lines until one starts with `word`; an end of output or the deadline is an error.
    async fn line_starting(&mut self, word: &str, deadline: Instant) -> Result<String, String> {
        loop {
            match timeout_at(deadline, self.lines.next_line()).await {
                Err(_) => return Err(format!("{}: no {word} line in time", self.name)),
                Ok(Err(e)) => return Err(format!("{}: reading its output: {e}", self.name)),
                Ok(Ok(None)) => return Err(format!("{}: exited before {word}", self.name)),
                Ok(Ok(Some(line))) if line.starts_with(word) => return Ok(line),
                Ok(Ok(Some(_))) => {}
            }
        }
    }

    /// Waits for the process to exit; past `deadline` it is killed and that is an error.
    async fn exit(&mut self, deadline: Instant) -> Result<(), String> {
        match timeout_at(deadline, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => Ok(()),
            Ok(Ok(status)) => Err(format!("{} exited with {status}", self.name)),
            Ok(Err(e)) => Err(format!("{}: waiting for it: {e}", self.name)),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!("{} did not exit in time (killed)", self.name))
            }
        }
    }

    /// Asks the node to leave gracefully (SIGTERM: it relocates its objects, then shuts
    /// down) and waits for its report and its exit.
    pub(crate) async fn leave(&mut self) -> Result<Left, String> {
        let deadline = Instant::now() + LEAVE_WITHIN;
        // tokio sends only SIGKILL; `kill` sends SIGTERM without a libc dependency.
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .map_err(|e| format!("cannot run kill: {e}"))?;
        if !status.success() {
            return Err(format!("kill -TERM {} failed ({status})", self.pid));
        }
        let relocated = self.line_starting("RELOCATED", deadline).await?;
        let stopped = self.line_starting("STOPPED", deadline).await?;
        self.exit(deadline).await?;
        let word = |line: &str, i: usize| line.split_whitespace().nth(i).unwrap_or("?").to_owned();
        let number = |i: usize| word(&relocated, i).parse().unwrap_or(u64::MAX);
        Ok(Left {
            outcome: word(&relocated, 1),
            reason: word(&relocated, 2),
            moved: number(3),
            remaining: number(4),
            stopped: word(&stopped, 1),
        })
    }

    /// Stops the node without moving anything (closes its stdin) and waits for its exit;
    /// returns its shutdown's outcome.
    pub(crate) async fn stop(&mut self) -> Result<String, String> {
        let deadline = Instant::now() + STOP_WITHIN;
        drop(self.child.stdin.take());
        let stopped = self.line_starting("STOPPED", deadline).await?;
        self.exit(deadline).await?;
        Ok(stopped.split_whitespace().nth(1).unwrap_or("?").to_owned())
    }
}
