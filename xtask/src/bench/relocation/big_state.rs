//! Case 1, `big-state`: one Actor whose state is 64 MiB moved between two processes, beside the
//! same bytes over a raw tokio TCP socket between the same two processes.
//!
//! Each process is `crates/zlink-runtime/examples/relocation_peer.rs` (built in release; a
//! 2-worker tokio runtime): one ZLink root, one Object Server on loopback Redis, the Actor
//! types `blob` (PreserveStateWith; the adapter's capture is a copy of the bytes, its restore
//! a copy back) and `blob-shared` (the adapter's `capture_bytes` / `restore_bytes` hand the
//! shared bytes over, no copy). The case runs once per type, each with its own chain of
//! processes P0, P1, …: P0 starts alone and creates and
//! fills the Actor (so it lands on P0); each round starts a fresh P(i+1), waits until both see
//! each other, and then, in alternating order,
//!
//! - **relocate**: P(i) runs a host Relocate (PlannedMaintenance), which moves its one Actor
//!   to P(i+1); the figure is the whole `ZLinkHost::relocate` call timed inside P(i) (target
//!   search, descriptors, the stage records, capture, Restore and chunks over the mesh command
//!   plane, assembly and CRC check, restore, cutover). P(i+1) then checks the state's length
//!   and CRC-32C against the fill's;
//! - **raw**: P(i+1) listens on a raw tokio TCP socket, P(i) connects and sends the same
//!   number of bytes (an 8-byte length, then the bytes) and waits for a one-byte answer sent
//!   once all of them are in one buffer; timed inside P(i) from after the connect.
//!
//! Then P(i), now `Relocated`, shuts down and P(i+1) is the next round's source.
//!
//! `ZLINK_BENCH_RELOCATION_PEER=<path>` runs that prebuilt `relocation_peer` instead of
//! building one, to compare two builds of the runtime with the same bench (alternate them).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Args, MIB, median, ms, to_string};

/// How long one command may take to answer (the Relocate's own deadline is shorter).
const ANSWER: Duration = Duration::from_secs(180);
/// The Relocate's deadline, in milliseconds.
const RELOCATE_DEADLINE_MS: u64 = 120_000;
/// Relocate attempts per round (see [`relocate`]).
const ATTEMPTS: usize = 5;
/// How long the two processes may take to see each other.
const SETUP: Duration = Duration::from_secs(30);
/// A pause once both see each other, so each has read the other's descriptor (the peers poll
/// the Store every 100 ms) and the Relocate does not wait for its target.
const SETTLE: Duration = Duration::from_millis(500);

/// The environment variable naming a prebuilt `relocation_peer` to run instead of building
/// one (to compare two builds of the runtime with the same bench).
const PEER_OVERRIDE: &str = "ZLINK_BENCH_RELOCATION_PEER";

/// The `relocation_peer` example, built in release (or the binary [`PEER_OVERRIDE`] names).
fn peer_binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(PEER_OVERRIDE) {
        let path = PathBuf::from(path);
        println!(
            "   (relocation_peer from {PEER_OVERRIDE}: {})",
            path.display()
        );
        return Ok(path);
    }
    crate::examples::example_binary("zlink-runtime", "relocation_peer", true)
}

/// One `relocation_peer` process; closing its stdin (on drop) shuts it down in order.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    rid: String,
}

impl Peer {
    fn spawn(binary: &PathBuf, url: &str, prefix: &str) -> Result<Self, String> {
        let mut child = Command::new(binary)
            .args(["--redis", url, "--prefix", prefix, "--version", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdin = child.stdin.take();
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err("relocation_peer: no stdout".into());
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut peer = Self {
            child,
            stdin,
            lines,
            rid: String::new(),
        };
        let ready = peer.next_line(SETUP)?;
        match ready.strip_prefix("READY ") {
            Some(rid) => peer.rid = rid.trim().to_owned(),
            None => return Err(format!("relocation_peer said {ready:?}, not READY")),
        }
        Ok(peer)
    }

    fn next_line(&self, within: Duration) -> Result<String, String> {
        self.lines
            .recv_timeout(within)
            .map_err(|_| format!("relocation_peer {} did not answer in {within:?}", self.rid))
    }

    /// Sends one command line; its one answer line, which must start with `expect` (an
    /// answer that does not is the error).
    fn ask(&mut self, line: &str, expect: &str) -> Result<Vec<String>, String> {
        let stdin = self.stdin.as_mut().ok_or("relocation_peer: stdin closed")?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("relocation_peer {}: {e}", self.rid))?;
        let answer = self.next_line(ANSWER)?;
        let words: Vec<String> = answer.split_whitespace().map(str::to_owned).collect();
        if words.first().map(String::as_str) != Some(expect) {
            return Err(format!("`{line}` answered {answer:?}"));
        }
        Ok(words)
    }

    /// Waits until this process sees at least one Ready peer.
    fn wait_peer(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + SETUP;
        loop {
            let words = self.ask("PEERS", "PEERS")?;
            if words.get(1).and_then(|n| n.parse::<usize>().ok()) >= Some(1) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("{} has no Ready peer after {SETUP:?}", self.rid));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        crate::bench::transport::stop_child(&mut self.child, Duration::from_secs(10));
    }
}

/// Milliseconds in word `i` of an answer.
fn millis(words: &[String], i: usize) -> Result<Duration, String> {
    words
        .get(i)
        .and_then(|m| m.parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m >= 0.0)
        .map(|m| Duration::from_secs_f64(m / 1e3))
        .ok_or_else(|| format!("no milliseconds in {words:?}"))
}

pub(super) fn run(args: &Args) -> Result<(), String> {
    let binary = peer_binary()?;
    let prefix = super::fresh_prefix("big-state");
    println!();
    println!(
        "1. big-state: one Actor with {} MiB of state moved between two relocation_peer \
         processes (release, 2 workers each) by host Relocate, beside the same bytes over a raw \
         tokio TCP socket between the same two processes; {} round(s) per adapter, alternating \
         order (key prefix {prefix})",
        args.state_mib, args.rounds
    );
    let mut result = Ok(());
    for (stable_type, what) in ADAPTERS {
        println!("   {stable_type}: {what}");
        result = rounds(args, &binary, &prefix, stable_type);
        if result.is_err() {
            break;
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(to_string)?;
    rt.block_on(super::purge(&args.url, &prefix));
    result
}

/// The Actor types measured, each with what its adapter does.
const ADAPTERS: [(&str, &str); 2] = [
    (
        "blob",
        "the adapter copies the state on capture and on restore (an owned-buffer state)",
    ),
    (
        "blob-shared",
        "the adapter moves the state as shared bytes (capture_bytes / restore_bytes, no copy)",
    ),
];

fn rounds(args: &Args, binary: &PathBuf, prefix: &str, stable_type: &str) -> Result<(), String> {
    let state = args.state_mib * MIB;
    let mib_per_sec = |d: Duration| args.state_mib as f64 / d.as_secs_f64();
    let mut source = Peer::spawn(binary, &args.url, prefix)?;
    // One Actor per type, named after it.
    let id = format!("big-{stable_type}");
    let filled = source.ask(&format!("FILL {id} {state} {stable_type}"), "FILLED")?;
    let (owner, crc) = (filled.get(1).cloned(), filled.get(2).cloned());
    if owner.as_deref() != Some(source.rid.as_str()) {
        return Err(format!(
            "{id} landed on {owner:?}, not on the only process {}",
            source.rid
        ));
    }
    let crc = crc.ok_or("FILLED without a checksum")?;
    let (mut moves, mut raws, mut paired) = (Vec::new(), Vec::new(), Vec::new());
    let mut failures = 0;
    for round in 0..args.rounds {
        let mut target = Peer::spawn(binary, &args.url, prefix)?;
        source.wait_peer()?;
        target.wait_peer()?;
        std::thread::sleep(SETTLE);
        let (m, raw) = if round % 2 == 0 {
            let raw = raw_send(&mut source, &mut target, state)?;
            (relocate(&mut source, &mut target, &id, state, &crc)?, raw)
        } else {
            let m = relocate(&mut source, &mut target, &id, state, &crc)?;
            (m, raw_send(&mut source, &mut target, state)?)
        };
        let moved = m.took;
        println!(
            "   round {}: relocate {:>8.1} ms ({:>7.1} MiB/s)   raw TCP {:>7.1} ms ({:>7.1} MiB/s){}",
            round + 1,
            ms(moved),
            mib_per_sec(moved),
            ms(raw),
            mib_per_sec(raw),
            if m.failed.is_empty() {
                String::new()
            } else {
                format!(
                    "   after {} failed attempt(s) (Blocked/RelocationFailed, {:.1} ms)",
                    m.failed.len(),
                    ms(m.failed.iter().sum())
                )
            }
        );
        failures += m.failed.len();
        paired.push(mib_per_sec(moved) / mib_per_sec(raw));
        moves.push(moved);
        raws.push(raw);
        // The source is Relocated now: it ends, the target is the next round's source.
        drop(std::mem::replace(&mut source, target));
    }
    let total = |v: &[Duration]| v.iter().sum::<Duration>();
    let n = moves.len() as u32;
    let (m, r) = (total(&moves) / n, total(&raws) / n);
    println!(
        "   relocate (whole host Relocate call) mean {:>8.1} ms   {:>7.1} MiB/s",
        ms(m),
        mib_per_sec(m)
    );
    println!(
        "   raw tokio TCP send + 1-byte answer  mean {:>8.1} ms   {:>7.1} MiB/s",
        ms(r),
        mib_per_sec(r)
    );
    println!(
        "   relocate / raw throughput = {:.3}x over all rounds, {:.3}x median of the {n} paired \
         rounds (target >= 0.5x)",
        mib_per_sec(m) / mib_per_sec(r),
        median(paired)
    );
    if failures > 0 {
        println!(
            "   {failures} of {} Relocate attempts ended Blocked/RelocationFailed and were tried \
             again (see the peers' WARN lines). Runtime finding: the source queues the Restore \
             and all its chunks at once with try_send on the peer's control lane, whose byte \
             bound is 64 MiB, so a 64 MiB state (64 MiB plus chunk and envelope headers) is \
             refused (`Full`, reported as `ConnectionLost`) unless the writer drained part of it \
             meanwhile; `--state-mib 63` always fits",
            failures + moves.len()
        );
    }
    Ok(())
}

/// The raw baseline: `target` listens, `source` sends `state` bytes; the time inside `source`.
fn raw_send(source: &mut Peer, target: &mut Peer, state: usize) -> Result<Duration, String> {
    let sink = target.ask("SINK", "SINK")?;
    let port = sink.get(1).ok_or("SINK without a port")?;
    let sent = source.ask(&format!("SEND {port} {state}"), "SENT")?;
    millis(&sent, 1)
}

/// The move: `source` relocates (its one Actor goes to `target`, the only other process);
/// `target` then checks the state against the fill's checksum. The Relocate's time inside
/// `source`.
/// A Relocate that ends `Blocked/RelocationFailed` leaves the Actor on `source` and the host
/// serving again: it is tried again (at most [`ATTEMPTS`] times in all), and every failed
/// attempt is counted and printed, never hidden.
fn relocate(
    source: &mut Peer,
    target: &mut Peer,
    id: &str,
    state: usize,
    crc: &str,
) -> Result<Move, String> {
    let mut failed = Vec::new();
    let took = loop {
        let words = source.ask(&format!("RELOCATE {RELOCATE_DEADLINE_MS}"), "RELOCATED")?;
        let outcome: Vec<&str> = words.iter().skip(1).take(3).map(String::as_str).collect();
        match outcome.as_slice() {
            ["Relocated", "None", "1"] => break millis(&words, 4)?,
            ["Blocked", "RelocationFailed", "0"] if failed.len() + 1 < ATTEMPTS => {
                failed.push(millis(&words, 4)?);
                std::thread::sleep(Duration::from_millis(200));
            }
            _ if failed.len() + 1 >= ATTEMPTS => {
                return Err(format!(
                    "the host Relocate ended {words:?} on attempt {ATTEMPTS} of {ATTEMPTS} (a \
                     state near 64 MiB overflows the peer's 64 MiB control lane; try \
                     --state-mib 63)"
                ));
            }
            _ => return Err(format!("the host Relocate ended {words:?}")),
        }
    };
    let checked = target.ask(&format!("CHECK {id}"), "CHECKED")?;
    let expected = [state.to_string(), crc.to_owned(), target.rid.clone()];
    if checked.get(1..4) != Some(&expected[..]) {
        return Err(format!(
            "after the move {id} answered {checked:?}, expected {expected:?}"
        ));
    }
    Ok(Move { took, failed })
}

/// One round's move: the successful Relocate's time, and the time of each failed attempt
/// before it.
struct Move {
    took: Duration,
    failed: Vec<Duration>,
}
