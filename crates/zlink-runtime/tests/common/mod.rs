//! The harness the multi-process tests share: the `mesh_node` example built once, one driven
//! process per [`Node`] (commands on stdin, lines from stdout, bounded waits), and a key
//! [`Prefix`] of the test's own purged from the live Redis afterwards.

// Each test binary uses its own part of the harness.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use fred::interfaces::ClientLike;

/// How long any wait in these tests may take before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// How long a spawned node may take to print `READY`: every process test starts its nodes at
/// once, so on a loaded 2-core machine a start can queue behind a dozen others.
const START_WAIT: Duration = Duration::from_secs(60);

/// The example binary, built once per test run in the profile of this test executable.
pub(crate) fn binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/<test>-<hash>
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .expect("target/<profile>/deps")
            .to_path_buf();
        let target_dir = profile_dir.parent().expect("target dir").to_path_buf();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "build",
            "--quiet",
            "-p",
            "zlink-runtime",
            "--example",
            "mesh_node",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
        // `cargo test` sets the package's variables for the test process; build scripts (ring's)
        // rerun when they change, so passing them on would rebuild the TLS stack here and again
        // at the next `cargo test`.
        for (name, _) in std::env::vars_os() {
            let set_by_cargo_test = name.to_str().is_some_and(|n| {
                [
                    "CARGO_PKG_",
                    "CARGO_MANIFEST_",
                    "CARGO_CRATE_",
                    "CARGO_BIN_",
                ]
                .iter()
                .any(|p| n.starts_with(p))
                    || n == "CARGO_PRIMARY_PACKAGE"
                    || n == "CARGO_TARGET_TMPDIR"
            });
            if set_by_cargo_test {
                cmd.env_remove(name);
            }
        }
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo runs");
        assert!(
            status.success(),
            "building the mesh_node example failed: {status}"
        );
        profile_dir.join("examples").join("mesh_node")
    })
}

/// One `mesh_node` process; killed (after SIGCONT) when dropped.
pub(crate) struct Node {
    pub(crate) name: &'static str,
    pub(crate) child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every line read so far.
    pub(crate) seen: Vec<String>,
    pub(crate) rid: String,
}

impl Node {
    pub(crate) fn spawn(name: &'static str, redis: &str, prefix: &str) -> Node {
        Node::spawn_with(name, redis, prefix, &[])
    }

    /// [`spawn`](Node::spawn) with more arguments.
    pub(crate) fn spawn_with(
        name: &'static str,
        redis: &str,
        prefix: &str,
        extra: &[&str],
    ) -> Node {
        let mut child = Command::new(binary())
            .args(["--redis", redis, "--prefix", prefix])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("mesh_node starts");
        let stdout = child.stdout.take().expect("stdout");
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
            name,
            child,
            stdin,
            lines,
            seen: Vec::new(),
            rid: String::new(),
        };
        let ready = node.expect_within(START_WAIT, |l| l.starts_with("READY "));
        node.rid = ready
            .split_whitespace()
            .nth(1)
            .expect("READY <rid> <endpoint>")
            .to_owned();
        node
    }

    pub(crate) fn pid(&self) -> String {
        self.child.id().to_string()
    }

    pub(crate) fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("write a command");
        stdin.flush().expect("flush");
    }

    /// The next line (bounded by `within`), or `None`.
    pub(crate) fn next_line(&mut self, within: Duration) -> Option<String> {
        match self.lines.recv_timeout(within) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Reads lines until one matches `pred` (within [`WAIT`]).
    pub(crate) fn expect(&mut self, pred: impl Fn(&str) -> bool) -> String {
        self.expect_within(WAIT, pred)
    }

    /// Reads lines until one matches `pred` (within `within`).
    pub(crate) fn expect_within(
        &mut self,
        within: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(line) if pred(&line) => return line,
                Some(_) => {}
                None => panic!(
                    "{}: no expected line within {within:?}; saw {:?}",
                    self.name, self.seen
                ),
            }
        }
    }

    /// Every line that arrives within `window`.
    pub(crate) fn drain(&mut self, window: Duration) -> Vec<String> {
        let end = Instant::now() + window;
        let mut out = Vec::new();
        while let Some(line) = self.next_line(end.saturating_duration_since(Instant::now())) {
            out.push(line);
        }
        out
    }

    /// Sends a command and returns its `REPLY …` / `ERR …` line.
    pub(crate) fn call(&mut self, command: &str) -> String {
        self.send(command);
        self.expect(is_outcome)
    }

    /// Polls `PEERS` until it reports `n` (within [`WAIT`]).
    pub(crate) fn wait_peers(&mut self, n: usize) {
        let deadline = Instant::now() + WAIT;
        let want = format!("PEERS {n}");
        loop {
            self.send("PEERS");
            if self.expect(|l| l.starts_with("PEERS ")) == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: never reached {want}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends an `ACTORS` / `GET` command and reads its per-id lines up to `ACTORS-DONE`.
    pub(crate) fn get_or_create(&mut self, command: &str) -> Pass {
        self.send(command);
        let mut pass = Pass::default();
        loop {
            let line = self.expect(|l| l.starts_with("ACTOR"));
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["ACTOR", id, generation, node] => {
                    let generation = generation.parse().expect("a decimal generation");
                    pass.refs
                        .insert((*id).to_owned(), (generation, (*node).to_owned()));
                }
                ["ACTOR-ERR", ..] => pass.failed.push(line.clone()),
                ["ACTORS-DONE", ok, failed] => {
                    assert_eq!(
                        (ok.parse::<usize>(), failed.parse::<usize>()),
                        (Ok(pass.refs.len()), Ok(pass.failed.len())),
                        "{}: {line} does not match the lines before it",
                        self.name
                    );
                    return pass;
                }
                _ => panic!("{}: unexpected line {line:?}", self.name),
            }
        }
    }

    /// `QUIT`, then the `STOPPED <outcome>` line and a zero exit.
    pub(crate) fn quit(mut self) -> String {
        self.send("QUIT");
        let stopped = self.expect(|l| l.starts_with("STOPPED "));
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "{} exited with {status}", self.name);
                break;
            }
            assert!(Instant::now() < deadline, "{} did not exit", self.name);
            std::thread::sleep(Duration::from_millis(20));
        }
        stopped
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = signal("CONT", &self.pid());
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// What one `get_or_create` command reported.
#[derive(Default)]
pub(crate) struct Pass {
    /// Id → (ObjectGeneration, owner node RID hex).
    pub(crate) refs: BTreeMap<String, (u64, String)>,
    /// The `ACTOR-ERR …` lines.
    pub(crate) failed: Vec<String>,
}

pub(crate) fn is_outcome(line: &str) -> bool {
    line.starts_with("REPLY ") || line.starts_with("ERR ")
}

pub(crate) fn signal(sig: &str, pid: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill")
        .args([&format!("-{sig}"), pid])
        .stderr(Stdio::null())
        .status()
}

/// The test's unique key prefix, purged from the live Redis when dropped (even on panic).
pub(crate) struct Prefix {
    pub(crate) url: String,
    pub(crate) prefix: String,
}

impl Prefix {
    pub(crate) fn new(url: String, test: &str) -> Prefix {
        let prefix = format!("zlink-proc-{test}-{}", uuid_like());
        Prefix { url, prefix }
    }
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}-{nanos:x}", std::process::id())
}

impl Drop for Prefix {
    fn drop(&mut self) {
        let (url, pattern) = (self.url.clone(), format!("{}:*", self.prefix));
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(purge(&url, &pattern));
        })
        .join();
    }
}

/// Best-effort SCAN + UNLINK of `pattern` (the prefix is unique to the test run).
async fn purge(url: &str, pattern: &str) {
    let Ok(config) = fred::types::config::Config::from_url(url) else {
        return;
    };
    let Ok(client) = fred::types::Builder::from_config(config).build() else {
        return;
    };
    if client.init().await.is_err() {
        return;
    }
    let mut cursor = "0".to_owned();
    for _ in 0..10_000 {
        let Ok(reply) = client
            .custom::<Vec<fred::types::Value>, _>(
                fred::types::CustomCommand::new_static("SCAN", None, false),
                vec![
                    fred::types::Value::from(cursor.as_str()),
                    "MATCH".into(),
                    pattern.into(),
                    "COUNT".into(),
                    1000.into(),
                ],
            )
            .await
        else {
            break;
        };
        let Ok([next, keys]) = <[fred::types::Value; 2]>::try_from(reply) else {
            break;
        };
        let keys = keys.into_array();
        if !keys.is_empty() {
            let _ = client
                .custom::<fred::types::Value, _>(
                    fred::types::CustomCommand::new_static("UNLINK", None, false),
                    keys,
                )
                .await;
        }
        match next.as_string() {
            Some(c) if c != "0" => cursor = c,
            _ => break,
        }
    }
    let _ = client.quit().await;
}
