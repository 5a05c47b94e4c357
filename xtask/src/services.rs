//! Starting (or reusing) the Redis services the tests need: a single node, a second
//! independent server, and a local 3-master Redis Cluster, all on loopback, plus their TLS
//! counterparts (`crate::services_tls`).
//!
//! Servers this module starts are daemonized and left running so the next run reuses them;
//! they keep nothing on disk beyond cluster bookkeeping under the system temp directory.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::services_tls::{TlsServices, ensure_tls};

/// The Redis endpoints the tests get, as environment variables.
#[derive(Debug, Clone)]
pub(crate) struct TestServices {
    /// `ZLINK_TEST_REDIS_URL`.
    pub(crate) single: String,
    /// `ZLINK_TEST_REDIS_URL_2`.
    pub(crate) second: String,
    /// `ZLINK_TEST_REDIS_CLUSTER`: comma-separated `host:port` seeds.
    pub(crate) cluster: String,
    /// The TLS node and cluster with their certificate files, unless the environment already
    /// names them (`ZLINK_TEST_REDIS_TLS_URL` set).
    pub(crate) tls: Option<TlsServices>,
}

impl TestServices {
    pub(crate) fn env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            ("ZLINK_TEST_REDIS_URL", self.single.clone()),
            ("ZLINK_TEST_REDIS_URL_2", self.second.clone()),
            ("ZLINK_TEST_REDIS_CLUSTER", self.cluster.clone()),
        ];
        if let Some(tls) = &self.tls {
            env.extend(tls.env());
        }
        env
    }
}

const DEFAULT_SINGLE_PORT: u16 = 6379;
const SECOND_PORT: u16 = 6390;
const DEFAULT_CLUSTER_PORTS: [u16; 3] = [7101, 7102, 7103];

/// The cluster's ports: `ZLINK_TEST_CLUSTER_PORTS` (three comma-separated ports) or 7101-7103.
fn cluster_ports() -> Result<[u16; 3], String> {
    let Ok(spec) = std::env::var("ZLINK_TEST_CLUSTER_PORTS") else {
        return Ok(DEFAULT_CLUSTER_PORTS);
    };
    let ports: Vec<u16> = spec
        .split(',')
        .map(|p| p.trim().parse::<u16>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("ZLINK_TEST_CLUSTER_PORTS: {e}"))?;
    ports
        .try_into()
        .map_err(|_| "ZLINK_TEST_CLUSTER_PORTS needs exactly three ports".to_string())
}

/// Makes sure every service answers, starting what is missing.
pub(crate) fn ensure_all() -> Result<TestServices, String> {
    ensure_redis_binaries()?;
    let single = match std::env::var("ZLINK_TEST_REDIS_URL") {
        Ok(url) => url,
        Err(_) => {
            if ping(DEFAULT_SINGLE_PORT) {
                eprintln!(
                    "xtask: using the Redis already answering on 127.0.0.1:{DEFAULT_SINGLE_PORT}"
                );
                format!("redis://127.0.0.1:{DEFAULT_SINGLE_PORT}")
            } else {
                let port = free_port()?;
                start_server(port, false)?;
                format!("redis://127.0.0.1:{port}")
            }
        }
    };
    let second = match std::env::var("ZLINK_TEST_REDIS_URL_2") {
        Ok(url) => url,
        Err(_) => {
            if !ping(SECOND_PORT) {
                start_server(SECOND_PORT, false)?;
            }
            format!("redis://127.0.0.1:{SECOND_PORT}")
        }
    };
    let cluster = match std::env::var("ZLINK_TEST_REDIS_CLUSTER") {
        Ok(seeds) => seeds,
        Err(_) => ensure_cluster()?,
    };
    let tls = match std::env::var("ZLINK_TEST_REDIS_TLS_URL") {
        Ok(_) => None,
        Err(_) => Some(ensure_tls()?),
    };
    Ok(TestServices {
        single,
        second,
        cluster,
        tls,
    })
}

fn have(bin: &str) -> bool {
    Command::new(bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Installs redis-server / redis-cli / redis-benchmark through the system package manager when
/// they are missing and we are root; otherwise says exactly what to run.
fn ensure_redis_binaries() -> Result<(), String> {
    if have("redis-server") && have("redis-cli") {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let install = "apt-get update && apt-get install -y redis-server redis-tools";
    if !root || !have("apt-get") {
        return Err(format!(
            "redis-server/redis-cli are not installed; install them with:\n  sudo sh -c '{install}'"
        ));
    }
    eprintln!("xtask: installing Redis: {install}");
    let ok = Command::new("sh")
        .args([
            "-c",
            &format!("DEBIAN_FRONTEND=noninteractive {install} >/dev/null"),
        ])
        .status()
        .is_ok_and(|s| s.success());
    if ok && have("redis-server") && have("redis-cli") {
        Ok(())
    } else {
        Err(format!("installing Redis failed; run: {install}"))
    }
}

/// Whether a Redis on 127.0.0.1:`port` answers PING.
pub(crate) fn ping(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(300)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
}

/// Whether anything accepts TCP connections on 127.0.0.1:`port`.
pub(crate) fn is_listening(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

pub(crate) fn work_dir(port: u16) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir()
        .join("zlink-test-redis")
        .join(port.to_string());
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

fn start_server(port: u16, cluster: bool) -> Result<(), String> {
    let dir = work_dir(port)?;
    let port_s = port.to_string();
    let mut cmd = Command::new("redis-server");
    cmd.args([
        "--port",
        &port_s,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "yes",
    ]);
    cmd.arg("--dir").arg(&dir);
    cmd.arg("--logfile").arg(dir.join("redis.log"));
    cmd.arg("--pidfile").arg(dir.join("redis.pid"));
    if cluster {
        let conf = dir.join("nodes.conf");
        let _ = std::fs::remove_file(&conf);
        cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"]);
        cmd.arg("--cluster-config-file").arg(&conf);
    }
    eprintln!(
        "xtask: starting redis-server on 127.0.0.1:{port}{}",
        if cluster { " (cluster mode)" } else { "" }
    );
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run redis-server: {e}"))?;
    if !status.success() {
        return Err(format!(
            "redis-server on port {port} failed to start (see {})",
            dir.join("redis.log").display()
        ));
    }
    wait_until(Duration::from_secs(10), || ping(port)).map_err(|_| {
        format!(
            "redis-server on port {port} did not answer (see {})",
            dir.join("redis.log").display()
        )
    })
}

pub(crate) fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> Result<(), ()> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(())
}

fn cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The cluster is healthy: every node reports state ok and three masters own all slots.
fn cluster_healthy(ports: &[u16; 3]) -> bool {
    ports.iter().all(|&p| {
        cli(p, &["cluster", "info"]).is_some_and(|info| {
            info.contains("cluster_state:ok")
                && info.contains("cluster_slots_assigned:16384")
                && info.contains("cluster_size:3")
        })
    })
}

fn ensure_cluster() -> Result<String, String> {
    let ports = cluster_ports()?;
    let seeds = ports
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    if cluster_healthy(&ports) {
        eprintln!("xtask: reusing the Redis Cluster on {seeds}");
        return Ok(seeds);
    }
    // Anything half-made on our ports is ours (a previous run): stop it and start clean.
    for &p in &ports {
        if ping(p) {
            let is_cluster =
                cli(p, &["info", "cluster"]).is_some_and(|i| i.contains("cluster_enabled:1"));
            if !is_cluster {
                return Err(format!(
                    "port {p} is taken by a Redis that is not a cluster node; free ports {ports:?} or set ZLINK_TEST_REDIS_CLUSTER"
                ));
            }
            let _ = cli(p, &["shutdown", "nosave"]);
            let _ = wait_until(Duration::from_secs(5), || !ping(p));
        }
    }
    for &p in &ports {
        start_server(p, true)?;
    }
    let nodes: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut args = vec!["--cluster".to_string(), "create".to_string()];
    args.extend(nodes);
    args.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
    let out = Command::new("redis-cli")
        .args(&args)
        .output()
        .map_err(|e| format!("redis-cli: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "redis-cli --cluster create failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    wait_until(Duration::from_secs(30), || cluster_healthy(&ports))
        .map_err(|_| "the Redis Cluster did not reach cluster_state:ok".to_string())?;
    eprintln!("xtask: Redis Cluster ready on {seeds}");
    Ok(seeds)
}
