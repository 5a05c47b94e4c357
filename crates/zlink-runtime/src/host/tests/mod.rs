//! MeshNode behaviour tests: several roots in one process over one shared Location Store (the
//! in-memory store, the live Redis single node, the live Redis Cluster) or over manual peers,
//! talking over loopback TCP.

mod mesh_harness;
mod support;

mod actors;
mod adapter_context;
mod admission;
mod audit;
mod basics;
mod channels;
mod creation;
mod creation_ends;
mod disposal;
mod forwarding;
mod health;
mod instances;
mod job_queue;
mod join_across;
mod lifecycle;
mod membership;
mod membership_moves;
mod messaging;
mod objects;
mod readiness;
mod recovery;
mod relocate_object;
mod relocation;
mod route_source;
mod same_node_errors;
mod spots;
mod store_failure;
mod store_loss;
mod timers;
mod tls;
mod topology;
mod typed;
