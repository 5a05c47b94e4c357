//! A private Redis Cluster of a fault run: three masters with one replica each, six
//! `redis-server` child processes on free loopback ports (each with a free cluster bus port),
//! no persistence, each signalled or killed on its own. What the failover scenario needs of it:
//! which master holds the store's hash slot and which replica follows it, replication offsets,
//! a ballast write that fills the replication link, and a `CLUSTER FAILOVER TAKEOVER`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::procs::signal;
use crate::services;

/// How long the cluster, or a change of it, may take to settle.
const SETTLE: Duration = Duration::from_secs(30);

/// The failure detection timeout of the cluster's nodes: well past any hold of the scenario,
/// so no automatic failover runs before the scenario's own.
const NODE_TIMEOUT_MS: u32 = 5_000;

/// One node of the cluster.
struct ClusterNode {
    port: u16,
    child: Option<Child>,
}

/// Three masters and their replicas.
pub(crate) struct Cluster {
    nodes: Vec<ClusterNode>,
    dir: PathBuf,
}

impl Cluster {
    /// Starts six servers, joins them (`redis-cli --cluster create … --cluster-replicas 1`) and
    /// waits until every node reports `cluster_state:ok` and every replica's link is up.
    pub(crate) fn start() -> Result<Cluster, String> {
        let dir = std::env::temp_dir()
            .join("zlink-faults")
            .join(format!("cluster-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cluster = Cluster {
            nodes: Vec::new(),
            dir,
        };
        for _ in 0..6 {
            let port = free_port_with_bus()?;
            let node_dir = cluster.dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir)
                .map_err(|e| format!("{}: {e}", node_dir.display()))?;
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .args(["--cluster-enabled", "yes"])
                .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
                .arg("--dir")
                .arg(&node_dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot run redis-server: {e}"))?;
            cluster.nodes.push(ClusterNode {
                port,
                child: Some(child),
            });
            services::wait_until(Duration::from_secs(10), || services::ping(port))
                .map_err(|()| format!("redis-server on port {port} did not answer"))?;
        }
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(
            cluster
                .nodes
                .iter()
                .map(|n| format!("127.0.0.1:{}", n.port)),
        );
        args.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
        let out = Command::new("redis-cli")
            .args(&args)
            .output()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        cluster.wait_settled(|c| {
            let replicas = (0..c.nodes.len())
                .filter(|&i| c.info(i, "replication", "role").as_deref() == Some("slave"))
                .collect::<Vec<_>>();
            replicas.len() == 3
                && replicas.iter().all(|&i| {
                    c.info(i, "replication", "master_link_status").as_deref() == Some("up")
                })
        })?;
        Ok(cluster)
    }

    /// The store URL every client of the run uses (`redis-cluster://` with every node a seed).
    pub(crate) fn url(&self) -> String {
        let mut seeds = self.seeds().into_iter();
        let first = seeds.next().unwrap_or_default();
        let rest: Vec<String> = seeds.map(|s| format!("node={s}")).collect();
        format!("redis-cluster://{first}?{}", rest.join("&"))
    }

    /// `host:port` of every node still running.
    pub(crate) fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect()
    }

    /// `redis-cli` against node `i`: its trimmed output.
    pub(crate) fn cli(&self, i: usize, args: &[&str]) -> Result<String, String> {
        let port = self.nodes.get(i).ok_or("no such node")?.port;
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(args)
            .output()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// One field of `INFO <section>` of node `i`.
    pub(crate) fn info(&self, i: usize, section: &str, field: &str) -> Option<String> {
        let info = self.cli(i, &["INFO", section]).ok()?;
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{field}:")))
            .map(|v| v.trim().to_owned())
    }

    /// Node `i`'s replication offset: what a master has produced, or what a replica has
    /// processed of its master's stream (`master_repl_offset` either way).
    pub(crate) fn offset(&self, i: usize) -> Result<u64, String> {
        self.info(i, "replication", "master_repl_offset")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("node {i} reports no replication offset"))
    }

    /// The process id of node `i`.
    pub(crate) fn pid(&self, i: usize) -> Result<u32, String> {
        self.nodes
            .get(i)
            .and_then(|n| n.child.as_ref())
            .map(Child::id)
            .ok_or_else(|| format!("node {i} is not running"))
    }

    /// `kill -9` of node `i`, waiting for its exit.
    pub(crate) fn kill(&mut self, i: usize) -> Result<(), String> {
        let node = self.nodes.get_mut(i).ok_or("no such node")?;
        if let Some(mut child) = node.child.take() {
            signal(child.id(), "KILL")?;
            let _ = child.wait();
        }
        Ok(())
    }

    /// The indexes of the master serving hash slot `slot` and of its replica (`None` when it
    /// has none), as the first running node sees the cluster.
    pub(crate) fn master_and_replica_of(
        &self,
        slot: u16,
    ) -> Result<(usize, Option<usize>), String> {
        let asked = self
            .nodes
            .iter()
            .position(|n| n.child.is_some())
            .ok_or("no node is running")?;
        self.slot_seen_by(asked, slot)
    }

    /// Whether every running node sees node `master` serving hash slot `slot`.
    pub(crate) fn all_see_serving(&self, master: usize, slot: u16) -> bool {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].child.is_some())
            .all(|i| self.slot_seen_by(i, slot).is_ok_and(|(m, _)| m == master))
    }

    /// The master serving `slot` and its replica, as node `asked` sees the cluster.
    fn slot_seen_by(&self, asked: usize, slot: u16) -> Result<(usize, Option<usize>), String> {
        let table = self.cli(asked, &["CLUSTER", "NODES"])?;
        // `<id> <ip:port@bus> <flags> <master-id|-> <ping> <pong> <epoch> <link> <slots>…`
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        let serves = |ranges: &[&str]| {
            ranges.iter().any(|r| {
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()),
                    (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            })
        };
        let master = rows
            .iter()
            .find(|r| r.len() > 8 && r[2].contains("master") && serves(&r[8..]))
            .ok_or_else(|| format!("no master serves slot {slot}"))?;
        let replica = rows
            .iter()
            .find(|r| {
                r.len() > 3 && r[2].contains("slave") && !r[2].contains("fail") && r[3] == master[0]
            })
            .map(|r| self.index_of(r[1]))
            .transpose()?;
        Ok((self.index_of(master[1])?, replica))
    }

    fn index_of(&self, address: &str) -> Result<usize, String> {
        let port: u16 = address
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| format!("`{address}` is no node address"))?;
        self.nodes
            .iter()
            .position(|n| n.port == port)
            .ok_or_else(|| format!("{address} is not a node of this run"))
    }

    /// Writes `chunks` values of `chunk` bytes of ballast to master `i` (keys `<key>-<n>`,
    /// one `SET` each from a script, pipelined through one `redis-cli`, so the master is
    /// never busy for long). Used to fill a stopped replica's link so what the master writes
    /// next stays in its own memory.
    pub(crate) fn ballast(
        &self,
        i: usize,
        key: &str,
        chunks: usize,
        chunk: usize,
    ) -> Result<(), String> {
        use std::io::Write as _;
        let port = self.nodes.get(i).ok_or("no such node")?.port;
        let mut child = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run redis-cli: {e}"))?;
        let mut stdin = child.stdin.take().ok_or("redis-cli has no stdin")?;
        for n in 0..chunks {
            writeln!(
                stdin,
                "EVAL \"redis.call('SET', KEYS[1], string.rep('b', tonumber(ARGV[1]))) return 1\" 1 \"{key}-{n}\" {chunk}"
            )
            .map_err(|e| format!("writing to redis-cli: {e}"))?;
        }
        drop(stdin);
        let out = child
            .wait_with_output()
            .map_err(|e| format!("redis-cli: {e}"))?;
        let replies = String::from_utf8_lossy(&out.stdout);
        let ok = replies.lines().filter(|l| l.trim() == "1").count();
        if ok == chunks {
            Ok(())
        } else {
            Err(format!("{ok} of {chunks} ballast writes went through"))
        }
    }

    /// `CLUSTER FAILOVER TAKEOVER` on replica `i`: it becomes a master at once, without its
    /// master's agreement or any further data from it.
    pub(crate) fn takeover(&self, i: usize) -> Result<(), String> {
        let reply = self.cli(i, &["CLUSTER", "FAILOVER", "TAKEOVER"])?;
        if reply == "OK" {
            Ok(())
        } else {
            Err(format!("CLUSTER FAILOVER TAKEOVER answered `{reply}`"))
        }
    }

    /// Waits (bounded) until every running node reports `cluster_state:ok` and `more` holds.
    pub(crate) fn wait_settled(&self, more: impl Fn(&Cluster) -> bool) -> Result<(), String> {
        let start = Instant::now();
        while start.elapsed() < SETTLE {
            let ok = (0..self.nodes.len())
                .filter(|&i| self.nodes[i].child.is_some())
                .all(|i| {
                    self.cli(i, &["CLUSTER", "INFO"])
                        .is_ok_and(|info| info.contains("cluster_state:ok"))
                });
            if ok && more(self) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("the cluster did not settle within {SETTLE:?}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = signal(child.id(), "CONT");
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free loopback port whose cluster bus port (+10000) is free too.
fn free_port_with_bus() -> Result<u16, String> {
    for _ in 0..200 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        let bus_free = port
            .checked_add(10_000)
            .is_some_and(|bus| std::net::TcpListener::bind(("127.0.0.1", bus)).is_ok());
        if bus_free {
            return Ok(port);
        }
    }
    Err("no free port with a free cluster bus port".into())
}
