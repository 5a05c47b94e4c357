//! Encode and decode cost of the canonical records, on the golden fixture's authority record
//! (the Spot one, with a pending creation) and MeshNode descriptor record.
//!
//! `cargo bench -p zlink-codec` prints criterion's time per operation (ns/op).

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use zlink_codec::{AuthorityRecord, MeshNodeRecord};

fn fixture_json(vector: &str) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/golden/store-record-v1.json"
    );
    let f: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let v = f["valueVectors"]["genericOpaqueRecord"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == vector)
        .unwrap();
    let hex = v["jsonBytesHex"].as_str().unwrap();
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn records(c: &mut Criterion) {
    let authority_bytes = fixture_json("authority-spot-normal");
    let authority = AuthorityRecord::decode(&authority_bytes).unwrap();
    let mesh_bytes = fixture_json("meshNodeDescriptor-normal");
    let mesh = MeshNodeRecord::decode(&mesh_bytes).unwrap();

    let mut g = c.benchmark_group("records");
    g.bench_function("authority/encode", |b| {
        b.iter(|| black_box(&authority).encode().unwrap())
    });
    g.bench_function("authority/decode", |b| {
        b.iter(|| AuthorityRecord::decode(black_box(&authority_bytes)).unwrap())
    });
    g.bench_function("mesh_node_descriptor/encode", |b| {
        b.iter(|| black_box(&mesh).encode().unwrap())
    });
    g.bench_function("mesh_node_descriptor/decode", |b| {
        b.iter(|| MeshNodeRecord::decode(black_box(&mesh_bytes)).unwrap())
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = records
}
criterion_main!(benches);
