//! `zlink-chat`: a small chat service on zlink-rs. Users are Actors, rooms are Instance Spots
//! created by their first message, and both move with their state when a node leaves.
//!
//! ```text
//! zlink-chat demo [--redis URL]                 # the whole demo (three nodes, one leaves)
//! zlink-chat node --redis URL --prefix PREFIX   # one node (the demo starts three)
//! ```
//!
//! Reading order: `model.rs` (objects and messages), `node.rs` (a node process), `script.rs`
//! (the conversation and its checks), `nodes.rs` (the child processes), `demo.rs`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod demo;
mod model;
mod node;
mod nodes;
mod script;

/// The Redis the demo uses when no `--redis` is given.
const DEFAULT_REDIS: &str = "redis://127.0.0.1:6379";

/// The command line.
#[derive(Parser)]
#[command(
    name = "zlink-chat",
    about = "A chat service on zlink-rs: users are Actors, rooms are Instance Spots"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What to run.
#[derive(Subcommand)]
enum Command {
    /// Starts three nodes, plays a conversation, makes one node leave and checks that every
    /// history survived, then stops everything and purges its Redis keys.
    Demo {
        /// The Redis the Location and Relocation Stores live in.
        #[arg(long, default_value = DEFAULT_REDIS)]
        redis: String,
    },
    /// One Object Server node of the chat mesh (see `node.rs` for its output).
    Node {
        /// The Redis the Location and Relocation Stores live in.
        #[arg(long)]
        redis: String,
        /// The key prefix every node of one chat shares.
        #[arg(long)]
        prefix: String,
    },
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let (what, outcome) = match Cli::parse().command {
        Command::Demo { redis } => ("demo", demo::run(&redis).await),
        Command::Node { redis, prefix } => {
            let outcome = node::run(&redis, &prefix).await;
            ("node", outcome.map_err(|e| e.to_string()))
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zlink-chat {what} FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
