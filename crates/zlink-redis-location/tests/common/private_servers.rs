//! Private `redis-server` processes for the durability tests: a master with one replica, and a
//! Redis Cluster of masters with one replica each, all on free loopback ports, each process
//! stoppable (SIGSTOP / SIGCONT) and killed when dropped. Nothing is persisted; every loop is
//! bounded.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server, a replication link or a cluster may take to come up.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// One `redis-server` child process.
pub struct RedisProc {
    pub port: u16,
    child: Child,
    dir: PathBuf,
}

impl RedisProc {
    /// Starts `redis-server` on `port` with `extra` arguments and waits until it answers.
    pub fn start(port: u16, extra: &[&str]) -> RedisProc {
        let dir = std::env::temp_dir()
            .join("zlink-durability-tests")
            .join(format!("{port}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("test dir");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server runs (install redis-server)");
        let p = RedisProc { port, child, dir };
        wait_until("redis-server answers", || {
            p.cli(&["PING"]).is_some_and(|r| r == "PONG")
        });
        p
    }

    /// `redis-cli` against this server: its trimmed output, `None` when it failed.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Whether this server holds `key` (a cluster replica is asked after `READONLY`, so it
    /// answers from its own data instead of redirecting).
    pub fn has_key(&self, key: &str) -> bool {
        use std::io::Write as _;
        let Ok(mut child) = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
        else {
            return false;
        };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = writeln!(stdin, "READONLY\nEXISTS \"{key}\"");
        }
        let Ok(out) = child.wait_with_output() else {
            return false;
        };
        String::from_utf8_lossy(&out.stdout).lines().last() == Some("1")
    }

    /// One field of `INFO <section>`.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let info = self.cli(&["INFO", section])?;
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_owned())
    }

    /// Sends `signal` (`STOP`, `CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{signal} {}", self.child.id());
    }

    /// The `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Waits until this replica's link to its master is up.
    pub fn wait_link_up(&self) {
        wait_until("the replica's link is up", || {
            self.info("replication", "master_link_status").as_deref() == Some("up")
        });
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Waits (bounded by [`READY_WITHIN`]) until `f` holds; panics naming `what` otherwise.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < READY_WITHIN {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not within {READY_WITHIN:?}");
}

/// A free loopback port whose cluster bus port (+10000) is free too.
pub fn free_port() -> u16 {
    for _ in 0..200 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let bus_free = port
            .checked_add(10_000)
            .is_some_and(|bus| std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok());
        if bus_free {
            return port;
        }
    }
    panic!("no free port with a free bus port");
}

/// A master and one replica of it.
pub struct ReplicaPair {
    pub master: RedisProc,
    pub replica: RedisProc,
}

impl ReplicaPair {
    pub fn start() -> ReplicaPair {
        let master = RedisProc::start(free_port(), &[]);
        let of = format!("127.0.0.1 {}", master.port);
        let mut extra: Vec<&str> = vec!["--replicaof"];
        extra.extend(of.split(' '));
        let replica = RedisProc::start(free_port(), &extra);
        replica.wait_link_up();
        ReplicaPair { master, replica }
    }
}

/// A Redis Cluster of `masters` masters with one replica each.
pub struct PrivateCluster {
    pub nodes: Vec<RedisProc>,
}

impl PrivateCluster {
    pub fn start(masters: usize) -> PrivateCluster {
        let nodes: Vec<RedisProc> = (0..2 * masters)
            .map(|_| {
                RedisProc::start(
                    free_port(),
                    &["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"],
                )
            })
            .collect();
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        args.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
        let out = Command::new("redis-cli")
            .args(&args)
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = PrivateCluster { nodes };
        wait_until("the cluster is ok with every replica linked", || {
            cluster.nodes.iter().all(|n| {
                n.info("cluster", "cluster_enabled").as_deref() == Some("1")
                    && n.cli(&["CLUSTER", "INFO"])
                        .is_some_and(|i| i.contains("cluster_state:ok"))
                    && (n.info("replication", "role").as_deref() == Some("master")
                        || n.info("replication", "master_link_status").as_deref() == Some("up"))
            }) && cluster
                .nodes
                .iter()
                .filter(|n| n.info("replication", "role").as_deref() == Some("slave"))
                .count()
                == masters
        });
        cluster
    }

    /// The seeds, `host:port` each.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect()
    }

    /// The indexes (into `nodes`) of the master serving `slot` and of its replica.
    pub fn master_and_replica_of(&self, slot: u16) -> (usize, usize) {
        let table = self.nodes[0]
            .cli(&["CLUSTER", "NODES"])
            .expect("CLUSTER NODES");
        // `<id> <ip:port@bus> <flags> <master-id|-> ... <slot ranges>`
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let port_of = |addr: &str| -> u16 {
            addr.split('@')
                .next()
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| p.parse().ok())
                .expect("node address")
        };
        let index_of = |port: u16| {
            self.nodes
                .iter()
                .position(|n| n.port == port)
                .expect("a node of ours")
        };
        let serves = |ranges: &[&str]| {
            ranges.iter().any(|r| {
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            })
        };
        let master = rows
            .iter()
            .find(|r| r.len() > 8 && r[2].contains("master") && serves(&r[8..]))
            .expect("a master serves the slot");
        let replica = rows
            .iter()
            .find(|r| r.len() > 3 && r[2].contains("slave") && r[3] == master[0])
            .expect("the master has a replica");
        (index_of(port_of(master[1])), index_of(port_of(replica[1])))
    }
}
