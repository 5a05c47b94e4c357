//! Raw reading of every Redis key under a prefix, through `fred`, for the audit and `decode`:
//! `SCAN` (on every primary of a Cluster), then per key `TYPE`, `PTTL` and `GET` or
//! `ZRANGE … WITHSCORES`. Read-only.

use std::time::Duration;

use bytes::Bytes;
use fred::clients::Client;
use fred::interfaces::ClientLike;
use fred::types::config::{Config, ServerConfig};
use fred::types::{Builder, CustomCommand, Value};

use crate::audit::{RawKey, RawValue, Report, Role, audit, role_of};
use crate::error::CliError;
use crate::finding::show_bytes;

/// Where the Location Store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// One Redis server, by `redis://` / `rediss://` URL.
    Single(String),
    /// A Redis Cluster, by `host:port` seeds.
    Cluster(Vec<String>),
}

impl Target {
    /// `host:port` seeds from a comma-separated list.
    pub fn cluster_from(seeds: &str) -> Result<Self, CliError> {
        let seeds: Vec<String> = seeds
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        if seeds.is_empty() {
            return Err(CliError::input("--cluster", "no host:port seed"));
        }
        Ok(Target::Cluster(seeds))
    }

    fn config(&self) -> Result<Config, CliError> {
        match self {
            Target::Single(url) => {
                Config::from_url(url).map_err(|e| CliError::input("--redis", e.to_string()))
            }
            Target::Cluster(seeds) => {
                let mut hosts = Vec::with_capacity(seeds.len());
                for s in seeds {
                    let (h, p) = s.rsplit_once(':').ok_or_else(|| {
                        CliError::input("--cluster", format!("{s:?} is not host:port"))
                    })?;
                    let port = p.parse::<u16>().map_err(|_| {
                        CliError::input("--cluster", format!("{s:?} has no valid port"))
                    })?;
                    hosts.push((
                        h.trim_start_matches('[').trim_end_matches(']').to_owned(),
                        port,
                    ));
                }
                Ok(Config {
                    server: ServerConfig::new_clustered(hosts),
                    ..Config::default()
                })
            }
        }
    }
}

/// How many times a nonconforming key is read again while it keeps changing.
const RECHECKS: usize = 8;

/// A raw read-only connection.
pub struct Raw {
    client: Client,
    cluster: bool,
    timeout: Duration,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Raw")
            .field("cluster", &self.cluster)
            .finish()
    }
}

/// `pattern` with Redis glob characters escaped.
pub fn glob_escape(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 2);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn bytes_of(v: &Value) -> Option<Vec<u8>> {
    v.as_bytes().map(<[u8]>::to_vec)
}

async fn connect_client(config: Config, timeout: Duration) -> Result<Client, CliError> {
    let mut builder = Builder::from_config(config);
    builder.with_connection_config(|c| {
        c.connection_timeout = timeout;
        c.internal_command_timeout = timeout;
        c.max_command_attempts = 1;
    });
    builder.with_performance_config(|p| p.default_command_timeout = timeout);
    let client = builder.build()?;
    client.init().await?;
    Ok(client)
}

impl Raw {
    /// Connects to `target` (each command bounded by `timeout`).
    pub async fn connect(target: &Target, timeout: Duration) -> Result<Self, CliError> {
        let client = connect_client(target.config()?, timeout).await?;
        Ok(Raw {
            client,
            cluster: matches!(target, Target::Cluster(_)),
            timeout,
        })
    }

    async fn cmd(
        &self,
        cmd: &'static str,
        key: Option<&[u8]>,
        args: Vec<Value>,
    ) -> Result<Value, CliError> {
        let hash = key.map_or(0, fred::util::redis_keyslot);
        Ok(self
            .client
            .custom(CustomCommand::new_static(cmd, hash, false), args)
            .await?)
    }

    /// Every key name under `{prefix}:` (on every primary of a Cluster).
    pub async fn scan_prefix(&self, prefix: &str) -> Result<Vec<Vec<u8>>, CliError> {
        let pattern = format!("{}:*", glob_escape(prefix));
        let mut names = Vec::new();
        if self.cluster {
            for node in self.client.split_cluster()? {
                let c = connect_client(node.client_config(), self.timeout).await?;
                let r = scan_all(&c, &pattern, &mut names).await;
                let _ = c.quit().await;
                r?;
            }
        } else {
            scan_all(&self.client, &pattern, &mut names).await?;
        }
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// One key as it is now.
    pub async fn read_key(&self, name: &[u8]) -> Result<RawKey, CliError> {
        let k = || vec![Value::Bytes(Bytes::copy_from_slice(name))];
        let kind = self.cmd("TYPE", Some(name), k()).await?;
        let kind = kind
            .as_str()
            .map(|s| s.into_owned())
            .ok_or(CliError::Reply { command: "TYPE" })?;
        let pttl = self
            .cmd("PTTL", Some(name), k())
            .await?
            .as_i64()
            .ok_or(CliError::Reply { command: "PTTL" })?;
        let value = match kind.as_str() {
            "none" => RawValue::Missing,
            "string" => match self.cmd("GET", Some(name), k()).await? {
                Value::Null => RawValue::Missing,
                v => RawValue::String(bytes_of(&v).ok_or(CliError::Reply { command: "GET" })?),
            },
            "zset" => {
                let mut args = k();
                args.extend([Value::from(0), Value::from(-1), Value::from("WITHSCORES")]);
                let pairs = zset_pairs(self.cmd("ZRANGE", Some(name), args).await?)?;
                // Redis holds no empty sorted set: the key was deleted after `TYPE`.
                if pairs.is_empty() {
                    RawValue::Missing
                } else {
                    RawValue::ZSet(pairs)
                }
            }
            other => RawValue::Other(other.to_owned()),
        };
        Ok(RawKey {
            name: name.to_vec(),
            value,
            pttl_ms: pttl,
        })
    }

    /// Every key under `{prefix}:`, read: the records first, the helper keys (sequence,
    /// index, snapshots) after them, so a record written while the audit reads is already
    /// counted by the sequence and listed by the index when those are read.
    pub async fn read_prefix(&self, prefix: &str) -> Result<Vec<RawKey>, CliError> {
        let mut names = self.scan_prefix(prefix).await?;
        // `false` sorts first: records and foreign keys, then the helpers.
        names.sort_by_key(|n| {
            !matches!(
                role_of(prefix, n),
                Role::Record(_) | Role::Foreign | Role::RelocationStore
            )
        });
        let mut out = Vec::new();
        for name in names {
            let key = self.read_key(&name).await?;
            if key.value != RawValue::Missing {
                out.push(key);
            }
        }
        Ok(out)
    }

    /// Audits every key under `prefix` while the store may be in use: a key found
    /// nonconforming is read again, with the helper keys, and its finding kept only if it
    /// still does not conform (a key deleted, rewritten or expired between two of the reads is
    /// not reported).
    pub async fn audit_prefix(&self, prefix: &str) -> Result<Report, CliError> {
        let keys = self.read_prefix(prefix).await?;
        let mut report = audit(prefix, &keys);
        if report.is_clean() {
            return Ok(report);
        }
        let is_helper = |n: &[u8]| {
            !matches!(
                role_of(prefix, n),
                Role::Record(_) | Role::Foreign | Role::RelocationStore
            )
        };
        let helper_names: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| is_helper(&k.name))
            .map(|k| k.name.clone())
            .collect();
        let mut kept = Vec::new();
        for finding in std::mem::take(&mut report.findings) {
            let Some(original) = keys.iter().find(|k| show_bytes(&k.name) == finding.key) else {
                kept.push(finding);
                continue;
            };
            // Read the key, the helpers, then the key again: a read where the key changed in
            // between proves nothing and is tried again.
            let mut last = Some(finding);
            for _ in 0..RECHECKS {
                let mut fresh = Vec::new();
                let before = if is_helper(&original.name) {
                    None
                } else {
                    Some(self.read_key(&original.name).await?)
                };
                if before
                    .as_ref()
                    .is_some_and(|k| k.value == RawValue::Missing)
                {
                    last = None;
                    break;
                }
                for name in &helper_names {
                    let k = self.read_key(name).await?;
                    if k.value != RawValue::Missing {
                        fresh.push(k);
                    }
                }
                if let Some(before) = before {
                    let after = self.read_key(&original.name).await?;
                    if after.value != before.value || (after.pttl_ms < 0) != (before.pttl_ms < 0) {
                        continue;
                    }
                    fresh.push(before);
                }
                last = audit(prefix, &fresh)
                    .findings
                    .into_iter()
                    .find(|f| Some(&f.key) == last.as_ref().map(|l| &l.key));
                break;
            }
            kept.extend(last);
        }
        report.census.nonconforming = kept.len();
        report.findings = kept;
        Ok(report)
    }

    /// Closes the connection.
    pub async fn quit(self) {
        let _ = self.client.quit().await;
    }
}

async fn scan_all(c: &Client, pattern: &str, names: &mut Vec<Vec<u8>>) -> Result<(), CliError> {
    let mut cursor = "0".to_owned();
    loop {
        let reply: Value = c
            .custom(
                CustomCommand::new_static("SCAN", 0u16, false),
                vec![
                    Value::from(cursor.as_str()),
                    Value::from("MATCH"),
                    Value::from(pattern),
                    Value::from("COUNT"),
                    Value::from(1000),
                ],
            )
            .await?;
        let Value::Array(parts) = reply else {
            return Err(CliError::Reply { command: "SCAN" });
        };
        let mut parts = parts.into_iter();
        let next = parts
            .next()
            .and_then(|v| v.as_str().map(|s| s.into_owned()))
            .ok_or(CliError::Reply { command: "SCAN" })?;
        match parts.next() {
            Some(Value::Array(keys)) => {
                for k in keys {
                    names.push(bytes_of(&k).ok_or(CliError::Reply { command: "SCAN" })?);
                }
            }
            Some(Value::Null) | None => {}
            Some(_) => return Err(CliError::Reply { command: "SCAN" }),
        }
        if next == "0" {
            return Ok(());
        }
        cursor = next;
    }
}

fn score(v: &Value) -> Option<f64> {
    match v {
        Value::Double(d) => Some(*d),
        Value::Integer(i) => Some(*i as f64),
        other => other.as_str()?.parse().ok(),
    }
}

/// `ZRANGE … WITHSCORES` as pairs (flat under RESP2, nested under RESP3).
fn zset_pairs(v: Value) -> Result<Vec<(Vec<u8>, f64)>, CliError> {
    let bad = || CliError::Reply { command: "ZRANGE" };
    let Value::Array(items) = v else {
        return Err(bad());
    };
    let mut out = Vec::with_capacity(items.len() / 2);
    if items.iter().all(|i| matches!(i, Value::Array(_))) && !items.is_empty() {
        for i in items {
            let Value::Array(pair) = i else {
                return Err(bad());
            };
            let [m, s] = pair.as_slice() else {
                return Err(bad());
            };
            out.push((bytes_of(m).ok_or_else(bad)?, score(s).ok_or_else(bad)?));
        }
    } else {
        for pair in items.chunks(2) {
            let [m, s] = pair else { return Err(bad()) };
            out.push((bytes_of(m).ok_or_else(bad)?, score(s).ok_or_else(bad)?));
        }
    }
    Ok(out)
}
