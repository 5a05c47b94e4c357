//! The raw side of the Redis Location Store benchmark: the provider's commands captured with
//! `MONITOR`, replayed by `redis-benchmark`, and checked with a bare fred client.

use super::*;

/// Parses one `MONITOR` line into its arguments (undoing Redis's `sdscatrepr` quoting).
pub(crate) fn monitor_args(line: &str) -> Option<Vec<Vec<u8>>> {
    let rest = &line[line.find("] ")? + 2..];
    let b = rest.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        if b[i] != b'"' {
            return None;
        }
        i += 1;
        let mut arg = Vec::new();
        loop {
            match *b.get(i)? {
                b'"' => {
                    i += 1;
                    break;
                }
                b'\\' => {
                    let c = *b.get(i + 1)?;
                    i += 2;
                    arg.push(match c {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'a' => 7,
                        b'b' => 8,
                        b'x' => {
                            let h = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                            i += 2;
                            u8::from_str_radix(h, 16).ok()?
                        }
                        other => other,
                    });
                }
                c => {
                    arg.push(c);
                    i += 1;
                }
            }
        }
        args.push(arg);
    }
    Some(args)
}

/// Runs one of each operation through the provider while `redis-cli MONITOR` watches, and
/// returns the `EVALSHA` command line each one sent.
pub(crate) async fn capture(
    ep: &Endpoint,
    fx: &Fixture,
    prefix: &str,
) -> Result<Vec<(Op, Vec<Vec<u8>>)>, String> {
    let monitor = Monitor::start(ep)?;
    let mut captured = Vec::new();
    for op in Op::ALL {
        fx.once(op).await?;
        let args = monitor.next_evalsha(prefix, &format!("the {} command", op.name()))?;
        captured.push((op, args));
    }
    Ok(captured)
}

/// A `redis-cli MONITOR` session whose `OK` was seen, its lines read on a thread; the child
/// and the thread end when it is dropped.
pub(crate) struct Monitor {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Monitor {
    /// Starts MONITOR and waits (at most 5 s) for its `OK` before anything is sent.
    pub(crate) fn start(ep: &Endpoint) -> Result<Monitor, String> {
        let mut child = Command::new("redis-cli")
            .args(ep.args())
            .arg("MONITOR")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("redis-cli: no stdout".into());
        };
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let monitor = Monitor {
            child,
            lines,
            reader: Some(reader),
        };
        let ok = monitor
            .lines
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "redis-cli MONITOR did not start")?;
        if ok.trim() != "OK" {
            return Err(format!("redis-cli MONITOR: {ok}"));
        }
        Ok(monitor)
    }

    /// The arguments of the next `EVALSHA` carrying `prefix`, waiting at most 5 s; `what`
    /// names the expected command in the error.
    pub(crate) fn next_evalsha(&self, prefix: &str, what: &str) -> Result<Vec<Vec<u8>>, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .map_err(|_| format!("MONITOR did not show {what}"))?;
            let Some(args) = monitor_args(&line) else {
                continue;
            };
            let ours = args
                .first()
                .is_some_and(|c| c.eq_ignore_ascii_case(b"EVALSHA"))
                && args.iter().any(|a| a.starts_with(prefix.as_bytes()));
            if ours {
                return Ok(args);
            }
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Replaces every occurrence of `from` in `hay` by `to`.
pub(crate) fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if !from.is_empty() && hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// The raw command of the fresh-key write: the key, its hex and its SHA-256 become random,
/// tagged with `run` (`redis-benchmark` may draw the same random numbers in every run).
pub(crate) fn randomized(args: &[Vec<u8>], k: &StoreKey, run: u32) -> Vec<Vec<u8>> {
    let sha = hex(&Sha256::digest(k.as_bytes()));
    let hx = hex(k.as_bytes());
    let tagged = format!("r{run}-__rand_int__");
    let tagged_key = format!("bench/w/r{run}-__rand_int__");
    args.iter()
        .map(|a| {
            let a = replace_all(a, sha.as_bytes(), tagged.as_bytes());
            let a = replace_all(&a, hx.as_bytes(), tagged.as_bytes());
            replace_all(&a, k.as_bytes(), tagged_key.as_bytes())
        })
        .collect()
}

/// `arg` with each NUL byte, which a command line cannot carry, made 0x01: the same length,
/// and the same work for the scripts, which treat member heads (whose length headers may hold
/// a NUL) as opaque bytes.
pub(crate) fn without_nul(mut arg: Vec<u8>) -> Vec<u8> {
    for b in &mut arg {
        if *b == 0 {
            *b = 1;
        }
    }
    arg
}

/// `redis-benchmark` running `args` with `concurrency` connections, `n` requests.
pub(crate) fn raw_benchmark(
    ep: &Endpoint,
    args: &[Vec<u8>],
    concurrency: usize,
    n: usize,
) -> Result<Figures, String> {
    use std::os::unix::ffi::OsStrExt;
    let out = Command::new("redis-benchmark")
        .args(ep.args())
        .args([
            "-c",
            &concurrency.to_string(),
            "-n",
            &n.to_string(),
            "-r",
            // `__rand_int__` draws from 0..r; r must fit a C int.
            "2000000000",
            "--csv",
        ])
        .args(args.iter().map(|a| std::ffi::OsStr::from_bytes(a)))
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text
        .lines()
        .rfind(|l| l.starts_with('"') && !l.starts_with("\"test\""))
        .ok_or_else(|| format!("redis-benchmark printed no result: {text}"))?;
    // "test","rps","avg","min","p50","p95","p99","max"; the test (the command) may itself
    // hold `","`, so the figures are taken from the end.
    let mut fields: Vec<f64> = last
        .trim_matches('"')
        .rsplitn(8, "\",\"")
        .take(7)
        .map(|f| f.parse::<f64>().unwrap_or(f64::NAN))
        .collect();
    fields.reverse();
    if fields.len() != 7 || fields.iter().any(|f| f.is_nan()) {
        return Err(format!("unexpected redis-benchmark output: {last}"));
    }
    Ok(Figures {
        ops_per_sec: fields[0],
        p50_ms: fields[3],
        p99_ms: fields[5],
        ops: n,
    })
}

/// A plain client to check what the raw commands do.
pub(crate) struct Checker {
    client: fred::clients::Client,
}

impl Checker {
    pub(crate) async fn connect(url: &str) -> Result<Checker, String> {
        let config = Config::from_url(url).map_err(|e| e.to_string())?;
        let client = Builder::from_config(config)
            .build()
            .map_err(|e| e.to_string())?;
        client.init().await.map_err(|e| e.to_string())?;
        Ok(Checker { client })
    }

    pub(crate) async fn cmd(&self, args: &[Vec<u8>]) -> Result<Value, String> {
        let (name, rest) = args.split_first().ok_or("empty command")?;
        let name = String::from_utf8_lossy(name).into_owned();
        let rest: Vec<Value> = rest
            .iter()
            .map(|a| Value::Bytes(Bytes::from(a.clone())))
            .collect();
        self.client
            .custom::<Value, Value>(fred::types::CustomCommand::new(name, None, false), rest)
            .await
            .map_err(|e| format!("raw command failed: {e}"))
    }

    /// How many records exist under `prefix` (`{prefix}:{zlink-location-v3}:opaque:*`).
    pub(crate) async fn records(&self, prefix: &str) -> Result<usize, String> {
        let pattern = format!("{prefix}:{{zlink-location-v3}}:opaque:*");
        let mut cursor = "0".to_owned();
        let mut n = 0;
        loop {
            let args: Vec<Vec<u8>> = ["SCAN", &cursor, "MATCH", &pattern, "COUNT", "10000"]
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect();
            let reply = self.cmd(&args).await?.into_array();
            let [next, keys] = <[Value; 2]>::try_from(reply).map_err(|_| "SCAN: bad reply")?;
            cursor = next.as_string().ok_or("SCAN: bad cursor")?;
            n += keys.into_array().len();
            if cursor == "0" {
                return Ok(n);
            }
        }
    }

    /// Runs the raw command once (placeholders filled) and checks it does the operation's work:
    /// a write or batch applies, a read finds the value, a scan page holds every key.
    pub(super) async fn verify(&self, op: Op, args: &[Vec<u8>]) -> Result<(), String> {
        let filled: Vec<Vec<u8>> = args
            .iter()
            .map(|a| replace_all(a, b"__rand_int__", b"999999999999"))
            .collect();
        let reply = self.cmd(&filled).await?.into_array();
        let ok = match op {
            Op::Write | Op::Batch => reply.first().and_then(Value::as_i64) == Some(1),
            Op::Read => reply.len() == 3,
            Op::Scan => {
                reply.first().and_then(Value::as_i64) == Some(1) && reply.len() == 4 + SCAN_KEYS
            }
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "the raw {} command does not do the operation: {reply:?}",
                op.name()
            ))
        }
    }
}
