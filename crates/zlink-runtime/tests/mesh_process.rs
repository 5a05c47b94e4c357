//! MeshNodes in separate processes (the `mesh_node` example) finding each other through the
//! live Redis and exchanging node-direct requests; a killed node ends an in-flight request
//! exactly once and nothing replays it elsewhere; a stalled (SIGSTOP) node times a request out
//! and serves again after SIGCONT.
//!
//! Needs `ZLINK_TEST_REDIS_URL` (skips loudly without it, fails under `CI` /
//! `ZLINK_REQUIRE_REDIS`). Each test uses a key prefix of its own and purges it afterwards.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use fred::interfaces::ClientLike;
use zlink_store_conformance::live;

/// How long any wait in these tests may take before it fails.
const WAIT: Duration = Duration::from_secs(20);

/// The example binary, built once per test run in the profile of this test executable.
fn binary() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        // target/<profile>/deps/mesh_process-<hash>
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
struct Node {
    name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every line read so far.
    seen: Vec<String>,
    rid: String,
}

impl Node {
    fn spawn(name: &'static str, redis: &str, prefix: &str) -> Node {
        let mut child = Command::new(binary())
            .args(["--redis", redis, "--prefix", prefix])
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
        let ready = node.expect(|l| l.starts_with("READY "));
        node.rid = ready
            .split_whitespace()
            .nth(1)
            .expect("READY <rid> <endpoint>")
            .to_owned();
        node
    }

    fn pid(&self) -> String {
        self.child.id().to_string()
    }

    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("write a command");
        stdin.flush().expect("flush");
    }

    /// The next line (bounded by `within`), or `None`.
    fn next_line(&mut self, within: Duration) -> Option<String> {
        match self.lines.recv_timeout(within) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Reads lines until one matches `pred` (within [`WAIT`]).
    fn expect(&mut self, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(line) if pred(&line) => return line,
                Some(_) => {}
                None => panic!(
                    "{}: no expected line within {WAIT:?}; saw {:?}",
                    self.name, self.seen
                ),
            }
        }
    }

    /// Every line that arrives within `window`.
    fn drain(&mut self, window: Duration) -> Vec<String> {
        let end = Instant::now() + window;
        let mut out = Vec::new();
        while let Some(line) = self.next_line(end.saturating_duration_since(Instant::now())) {
            out.push(line);
        }
        out
    }

    /// Sends a command and returns its `REPLY …` / `ERR …` line.
    fn call(&mut self, command: &str) -> String {
        self.send(command);
        self.expect(is_outcome)
    }

    /// Polls `PEERS` until it reports `n` (within [`WAIT`]).
    fn wait_peers(&mut self, n: usize) {
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

    /// `QUIT`, then the `STOPPED <outcome>` line and a zero exit.
    fn quit(mut self) -> String {
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

fn is_outcome(line: &str) -> bool {
    line.starts_with("REPLY ") || line.starts_with("ERR ")
}

fn signal(sig: &str, pid: &str) -> std::io::Result<std::process::ExitStatus> {
    Command::new("kill")
        .args([&format!("-{sig}"), pid])
        .stderr(Stdio::null())
        .status()
}

/// The test's unique key prefix, purged from the live Redis when dropped (even on panic).
struct Prefix {
    url: String,
    prefix: String,
}

impl Prefix {
    fn new(url: String, test: &str) -> Prefix {
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

/// Three nodes over one prefix, each seeing the other two.
fn three_nodes(test: &str) -> Option<(Prefix, [Node; 3])> {
    let url = live::env_or_skip("ZLINK_TEST_REDIS_URL", test)?;
    let prefix = Prefix::new(url, test);
    let mut nodes = [
        Node::spawn("A", &prefix.url, &prefix.prefix),
        Node::spawn("B", &prefix.url, &prefix.prefix),
        Node::spawn("C", &prefix.url, &prefix.prefix),
    ];
    for n in &mut nodes {
        n.wait_peers(2);
    }
    Some((prefix, nodes))
}

#[test]
fn three_processes_find_each_other_through_redis_and_exchange_requests() {
    let Some((_prefix, mut nodes)) =
        three_nodes("three_processes_find_each_other_through_redis_and_exchange_requests")
    else {
        return;
    };
    let rids: Vec<String> = nodes.iter().map(|n| n.rid.clone()).collect();
    for (i, from) in nodes.iter_mut().enumerate() {
        for (j, to) in rids.iter().enumerate() {
            if i == j {
                continue;
            }
            let text = format!("from-{i}-to-{j}");
            assert_eq!(
                from.call(&format!("REQ {to} {text}")),
                format!("REPLY {text}")
            );
        }
    }
    for n in nodes {
        assert_eq!(n.quit(), "STOPPED Stopped");
    }
}

#[test]
fn killed_node_ends_an_in_flight_request_exactly_once_without_replay() {
    let Some((_prefix, [mut a, mut b, mut c])) =
        three_nodes("killed_node_ends_an_in_flight_request_exactly_once_without_replay")
    else {
        return;
    };
    a.send(&format!("SLOW {} 5000", b.rid));
    // The handler runs on B; then B dies with the request in flight.
    b.expect(|l| l == "SLOW-RAN 5000");
    std::thread::sleep(Duration::from_millis(200));
    b.child.kill().expect("kill -9 B");
    let _ = b.child.wait();

    let outcome = a.expect(is_outcome);
    assert!(
        outcome == "ERR Unavailable" || outcome == "ERR DeadlineExceeded",
        "the in-flight request ended with {outcome:?}"
    );
    // Past the Slow handler's own end: no second outcome on A, no replay on C.
    let later = a.drain(Duration::from_secs(6));
    assert!(
        !later.iter().any(|l| is_outcome(l)),
        "A printed more: {later:?}"
    );
    c.drain(Duration::from_millis(200));
    assert!(
        !c.seen.iter().any(|l| l.starts_with("SLOW-RAN")),
        "C ran the Slow handler: {:?}",
        c.seen
    );
    // The survivors still talk and stop in order.
    assert_eq!(a.call(&format!("REQ {} still", c.rid)), "REPLY still");
    assert_eq!(a.quit(), "STOPPED Stopped");
    assert_eq!(c.quit(), "STOPPED Stopped");
}

#[test]
fn stalled_node_times_out_then_recovers() {
    let Some((_prefix, [mut a, b, c])) = three_nodes("stalled_node_times_out_then_recovers") else {
        return;
    };
    assert!(signal("STOP", &b.pid()).expect("kill -STOP").success());
    let started = Instant::now();
    assert_eq!(
        a.call(&format!("REQ {} stalled 1000", b.rid)),
        "ERR DeadlineExceeded"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "timed out too early"
    );
    assert!(signal("CONT", &b.pid()).expect("kill -CONT").success());

    for i in 0..3 {
        let text = format!("after-{i}");
        assert_eq!(
            a.call(&format!("REQ {} {text} 5000", b.rid)),
            format!("REPLY {text}")
        );
    }
    // The timed-out request's late reply (if B sent one) was discarded, not printed.
    let later = a.drain(Duration::from_millis(300));
    assert!(
        !later.iter().any(|l| is_outcome(l)),
        "A printed more: {later:?}"
    );
    for n in [a, b, c] {
        assert_eq!(n.quit(), "STOPPED Stopped");
    }
}
