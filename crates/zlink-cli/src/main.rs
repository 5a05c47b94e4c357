//! The `zlink` operator tool (see the crate README for the commands and exit codes).

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use comfy_table::Table;
use zlink_cli::audit::{Report, families};
use zlink_cli::decode::{DecodedMember, Input, decode, parse_input};
use zlink_cli::error::CliError;
use zlink_cli::nodes::{NodesSnapshot, read_nodes};
use zlink_cli::query::{EntryView, QueryRuntime};
use zlink_cli::redis::{Raw, Target};
use zlink_cli::{audit::RawValue, finding::show_bytes};
use zlink_location::{LookupKind, ObjectKind};
use zlink_redis_location::{RedisLocationOptions, RedisLocationStore};
use zlink_store_spi::DynLocationStore;

/// Exit code: the store holds nonconforming data (audit), or the decoded input does not conform.
const EXIT_NONCONFORMING: u8 = 1;
/// Exit code: the looked-up object or key does not exist.
const EXIT_NOT_FOUND: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "zlink",
    version,
    about = "Operator tool for the zlink-rs Location Store on Redis"
)]
struct Cli {
    /// The Redis server (`redis://…` or `rediss://…`).
    #[arg(
        long,
        global = true,
        default_value = "redis://127.0.0.1:6379",
        conflicts_with = "cluster"
    )]
    redis: String,
    /// A Redis Cluster instead: comma-separated `host:port` seeds.
    #[arg(long, global = true)]
    cluster: Option<String>,
    /// The Location Store's key prefix.
    #[arg(long, global = true, default_value = "zlink")]
    prefix: String,
    /// Print JSON (one document) instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Timeout of each Redis operation, in milliseconds.
    #[arg(long, global = true, default_value_t = 5000)]
    timeout_ms: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Every MeshNode descriptor, from one snapshot, with its owner lease's health.
    Nodes,
    /// The current location of one ActorId or SpotId.
    Locate {
        /// `actor` or `spot`.
        #[arg(value_parser = ["actor", "spot"])]
        kind: String,
        /// The global id.
        id: String,
    },
    /// The paged location list.
    List {
        /// Only this object kind (`actor`, `userSpot`, `instanceSpot`); default all three.
        #[arg(long, value_parser = ["actor", "userSpot", "instanceSpot"])]
        kind: Option<String>,
        /// Only this stable type.
        #[arg(long = "type")]
        stable_type: Option<String>,
        /// Only objects on nodes of this mesh.
        #[arg(long)]
        mesh: Option<String>,
        /// Entries per page (1..=1000).
        #[arg(long, default_value_t = 100)]
        page_size: u32,
    },
    /// Checks every key under the prefix byte for byte against the canonical formats.
    Audit,
    /// Decodes one record: hex member bytes, a Redis key, or a logical key (NUL as `\0`).
    Decode {
        /// The input.
        input: String,
    },
}

fn out(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{text}");
}

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn target(cli: &Cli) -> Result<Target, CliError> {
    match &cli.cluster {
        Some(seeds) => Target::cluster_from(seeds),
        None => Ok(Target::Single(cli.redis.clone())),
    }
}

async fn store(cli: &Cli) -> Result<Arc<dyn DynLocationStore>, CliError> {
    let options = match target(cli)? {
        Target::Single(url) => RedisLocationOptions::from_url(&url)?,
        Target::Cluster(seeds) => RedisLocationOptions::cluster(&seeds)?,
    }
    .with_key_prefix(cli.prefix.clone())?
    .with_operation_timeout(Duration::from_millis(cli.timeout_ms))?;
    Ok(Arc::new(RedisLocationStore::connect(options).await?))
}

fn print_nodes(cli: &Cli, snap: &NodesSnapshot) {
    if cli.json {
        return out(&json(snap));
    }
    let mut t = Table::new();
    t.set_header([
        "mesh",
        "rid",
        "gen",
        "state",
        "endpoint",
        "weight",
        "role",
        "channels",
        "capabilities",
        "descriptors",
        "owner",
        "lease",
        "live",
    ]);
    for n in &snap.nodes {
        t.add_row([
            n.mesh.clone(),
            n.rid.clone(),
            n.lifecycle_generation.to_string(),
            n.state.clone(),
            n.endpoint.clone(),
            n.weight.to_string(),
            n.role.clone(),
            n.channels
                .iter()
                .map(|(c, w)| format!("{c}={w}"))
                .collect::<Vec<_>>()
                .join(" "),
            n.capabilities.join(" "),
            [
                n.serves
                    .iter()
                    .map(|c| format!("serves {c}"))
                    .collect::<Vec<_>>(),
                n.publishes
                    .iter()
                    .map(|c| format!("publishes {c}"))
                    .collect(),
            ]
            .concat()
            .join(" "),
            format!("{}#{}", n.owner_id, n.lease_generation),
            n.lease.text(),
            if n.live { "yes" } else { "no" }.to_owned(),
        ]);
    }
    out(&t.to_string());
    out(&format!(
        "{} node(s); {} unreadable, {} undecodable",
        snap.nodes.len(),
        snap.unreadable.len(),
        snap.undecodable.len()
    ));
    for k in &snap.unreadable {
        out(&format!("unreadable: {k}"));
    }
    for (k, why) in &snap.undecodable {
        out(&format!("undecodable: {k}: {why}"));
    }
}

fn entry_table(entries: &[EntryView]) -> String {
    let mut t = Table::new();
    t.set_header([
        "id",
        "kind",
        "type",
        "generation",
        "mesh",
        "owner rid",
        "state",
    ]);
    for e in entries {
        t.add_row([
            e.id.clone(),
            e.kind.clone(),
            e.stable_type.clone(),
            e.object_generation.to_string(),
            e.mesh.clone(),
            e.owner_rid.clone(),
            e.state.clone(),
        ]);
    }
    t.to_string()
}

fn print_report(cli: &Cli, r: &Report) {
    if cli.json {
        let findings: Vec<_> = r
            .findings
            .iter()
            .map(|f| {
                serde_json::json!({
                    "key": f.key, "role": f.role, "logicalKey": f.logical_key,
                    "field": f.mismatch.field, "offset": f.mismatch.offset,
                    "expected": f.mismatch.expected, "found": f.mismatch.found,
                })
            })
            .collect();
        return out(&json(&serde_json::json!({
            "clean": r.is_clean(), "findings": findings, "census": r.census,
        })));
    }
    for f in &r.findings {
        out(&format!("NONCONFORMING {f}"));
    }
    let c = &r.census;
    let mut t = Table::new();
    t.set_header(["census", "count"]);
    for (name, n) in [
        ("keys", c.keys),
        ("records", c.records),
        ("tombstones", c.tombstones),
        ("history members", c.history_members),
        ("index entries", c.index_entries),
        ("dangling index entries", c.dangling_index_entries),
        (
            "relocation store keys (not audited)",
            c.relocation_store_keys,
        ),
        ("foreign keys", c.foreign),
        ("nonconforming keys", c.nonconforming),
    ] {
        t.add_row([name.to_owned(), n.to_string()]);
    }
    for family in families() {
        if let Some(n) = c.families.get(family) {
            t.add_row([format!("  {family}"), n.to_string()]);
        }
    }
    out(&t.to_string());
    out(if r.is_clean() {
        "audit: clean"
    } else {
        "audit: NONCONFORMING data found"
    });
}

fn print_decoded(cli: &Cli, label: &str, d: &DecodedMember) {
    if cli.json {
        return out(&json(&serde_json::json!({ "member": label, "decoded": d })));
    }
    out(&format!("{label}:"));
    let mut t = Table::new();
    t.set_header(["offset", "len", "field", "form", "value"]);
    for f in &d.fields {
        t.add_row([
            f.offset.to_string(),
            f.len.to_string(),
            f.field.clone(),
            f.form.clone(),
            f.value.clone(),
        ]);
    }
    out(&t.to_string());
    if let Some(family) = &d.family {
        out(&format!("value ({family}):"));
    }
    for (k, v) in &d.value {
        out(&format!("  {k} = {v}"));
    }
    if let Some(p) = &d.problem {
        out(&format!("NONCONFORMING {p}"));
    }
}

async fn run(cli: &Cli) -> Result<u8, CliError> {
    let timeout = Duration::from_millis(cli.timeout_ms);
    match &cli.command {
        Command::Nodes => {
            let store = store(cli).await?;
            let snap = read_nodes(store.as_ref()).await?;
            print_nodes(cli, &snap);
            Ok(0)
        }
        Command::Locate { kind, id } => {
            let kind = if kind == "actor" {
                LookupKind::Actor
            } else {
                LookupKind::Spot
            };
            let q = QueryRuntime::start(store(cli).await?).await?;
            let found = q.locate(kind, id).await;
            q.shutdown().await?;
            match found? {
                Some(e) => {
                    out(&if cli.json {
                        json(&e)
                    } else {
                        entry_table(std::slice::from_ref(&e))
                    });
                    Ok(0)
                }
                None => {
                    out(&if cli.json {
                        "null".to_owned()
                    } else {
                        format!("no record for {id:?}")
                    });
                    Ok(EXIT_NOT_FOUND)
                }
            }
        }
        Command::List {
            kind,
            stable_type,
            mesh,
            page_size,
        } => {
            let kinds = match kind.as_deref() {
                Some(k) => vec![
                    ObjectKind::parse(k).map_err(|e| CliError::input("--kind", e.to_string()))?,
                ],
                None => vec![
                    ObjectKind::Actor,
                    ObjectKind::UserSpot,
                    ObjectKind::InstanceSpot,
                ],
            };
            let q = QueryRuntime::start(store(cli).await?).await?;
            let mut all = Vec::new();
            let mut result = Ok(0);
            for k in kinds {
                let r = q
                    .list(
                        k,
                        stable_type.as_deref(),
                        mesh.as_deref(),
                        *page_size,
                        |page| {
                            if cli.json {
                                all.extend(page);
                            } else if !page.is_empty() {
                                out(&entry_table(&page));
                            }
                        },
                    )
                    .await;
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
            }
            q.shutdown().await?;
            result?;
            if cli.json {
                out(&json(&all));
            }
            Ok(0)
        }
        Command::Audit => {
            let raw = Raw::connect(&target(cli)?, timeout).await?;
            let report = raw.audit_prefix(&cli.prefix).await;
            raw.quit().await;
            let report = report?;
            print_report(cli, &report);
            Ok(if report.is_clean() {
                0
            } else {
                EXIT_NONCONFORMING
            })
        }
        Command::Decode { input } => {
            let input = parse_input(input, &cli.prefix)
                .map_err(|m| CliError::input("input", m.to_string()))?;
            match input {
                Input::Hex(bytes) => {
                    let d = decode(&bytes);
                    print_decoded(cli, "member", &d);
                    Ok(if d.problem.is_some() {
                        EXIT_NONCONFORMING
                    } else {
                        0
                    })
                }
                Input::RedisKey(name) => {
                    let raw = Raw::connect(&target(cli)?, timeout).await?;
                    let key = raw.read_key(&name).await;
                    raw.quit().await;
                    let key = key?;
                    let label = show_bytes(&name);
                    match key.value {
                        RawValue::Missing => {
                            out(&format!("{label}: no such key"));
                            Ok(EXIT_NOT_FOUND)
                        }
                        RawValue::ZSet(members) => {
                            let mut code = 0;
                            for (i, (m, score)) in members.iter().enumerate() {
                                let d = decode(m);
                                if d.problem.is_some() {
                                    code = EXIT_NONCONFORMING;
                                }
                                print_decoded(
                                    cli,
                                    &format!("{label} member[{i}] score {score}"),
                                    &d,
                                );
                            }
                            Ok(code)
                        }
                        RawValue::String(b) => {
                            out(&format!("{label}: string {:?}", show_bytes(&b)));
                            Ok(0)
                        }
                        RawValue::Other(t) => {
                            out(&format!("{label}: a Redis {t}, not a record"));
                            Ok(EXIT_NONCONFORMING)
                        }
                    }
                }
            }
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(&cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "zlink: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                let _ = writeln!(stderr, "  caused by: {s}");
                source = s.source();
            }
            ExitCode::from(e.kind().exit_code())
        }
    }
}
