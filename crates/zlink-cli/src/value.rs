//! Record values, checked byte for byte against their canonical form: the public records
//! through `zlink-codec` (decode, then re-encode and compare), the runtime-private rows against
//! their documented layouts (`docs/formats.md`), through the runtime's own public decoders
//! where it has them. Pure functions over bytes.

use serde_json::Value;
use zlink_codec::records::ObjectKind;
use zlink_codec::terminal::CreationTerminal;
use zlink_codec::{
    AuthorityRecord, ClientServerRecord, CodecError, FanoutPublisherRecord, MeshNodeRecord,
    ObjectId, OwnerId, OwnerLeaseRecord, RoutingId, StableType,
};
use zlink_location::{CapacityRow, PerActorMoveRecord};
use zlink_relocation::InventoryRoot;

use crate::family::Family;
use crate::finding::{Mismatch, show_bytes};
use crate::schema::{self, Kind, VERSION};

/// A value decoded field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The record family.
    pub family: Family,
    /// `(field path, value)` pairs in record order.
    pub fields: Vec<(String, String)>,
}

fn is_rid(s: &str) -> bool {
    RoutingId::from_hex(s).is_ok_and(|r| r.to_hex() == s)
}
fn is_hex32(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
fn is_hex32_nonzero(s: &str) -> bool {
    is_hex32(s) && s.bytes().any(|b| b != b'0')
}
fn is_kind(s: &str) -> bool {
    ObjectKind::parse(s).is_ok()
}
fn is_spot_kind(s: &str) -> bool {
    ObjectKind::parse(s).is_ok_and(|k| k.is_spot())
}
fn is_name(s: &str) -> bool {
    ObjectId::new(s).is_ok()
}
fn is_type(s: &str) -> bool {
    StableType::new(s).is_ok()
}
fn is_owner(s: &str) -> bool {
    OwnerId::new(s).is_ok()
}
fn is_version(s: &str) -> bool {
    zlink_store_spi::StoreVersion::new(s).is_ok()
}

const RID: Kind = Kind::Text(is_rid, "lowercase hex of a 1..=255-byte RoutingId");
const NAME: Kind = Kind::Text(is_name, "UTF-8, 1..=255 bytes, no NUL");
const TYPE: Kind = Kind::Text(is_type, "a stable type (UTF-8, 1..=255 bytes, no NUL)");
const OWNER: Kind = Kind::Text(is_owner, "an OwnerId (UTF-8, 1..=255 bytes, no NUL)");
const KIND: Kind = Kind::Text(is_kind, "actor, userSpot or instanceSpot");
const SPOT_KIND: Kind = Kind::Text(is_spot_kind, "userSpot or instanceSpot");
const U32: Kind = Kind::Num(u32::MAX as u64);
const U64: Kind = Kind::Num(u64::MAX);

/// `location-index` rows.
pub const LOCATION_INDEX: Kind = Kind::Obj(&[VERSION, ("objectGeneration", Kind::Dec(1))]);

/// `run-objects` rows (entries and markers alike).
pub const RUN_OBJECTS: Kind = Kind::Obj(&[VERSION]);

/// `creation-deadline` rows.
pub const CREATION_DEADLINE: Kind = Kind::Obj(&[
    VERSION,
    ("objectGeneration", Kind::Dec(1)),
    ("sourceRoutingIdHex", RID),
    ("sourceLeaseGeneration", Kind::Dec(1)),
    (
        "operationId",
        Kind::Text(is_hex32_nonzero, "32 lowercase hex digits, not all zero"),
    ),
    ("deadline", Kind::Dec(0)),
    ("abandonedAfter", Kind::Dec(0)),
]);

/// `capacity-reservation` rows.
pub const CAPACITY_RESERVATION: Kind = Kind::Obj(&[
    VERSION,
    (
        "reservationId",
        Kind::Text(is_hex32, "32 lowercase hex digits"),
    ),
    ("objectKind", KIND),
    ("id", NAME),
    ("stableType", TYPE),
    ("objectGeneration", Kind::Dec(1)),
    (
        "securedAtVersion",
        Kind::Text(is_version, "a StoreVersion (1..=64 bytes)"),
    ),
    ("carried", U64),
    ("sourceOwnerId", OWNER),
    ("sourceLeaseGeneration", Kind::Dec(1)),
    ("sourceMeshName", NAME),
    ("sourceRoutingIdHex", RID),
    ("targetOwnerId", OWNER),
    ("targetLeaseGeneration", Kind::Dec(1)),
    ("targetMeshName", NAME),
    ("targetRoutingIdHex", RID),
    ("targetLifecycleGeneration", Kind::Dec(0)),
    ("actors", U32),
    ("spots", U32),
    (
        "spotType",
        Kind::Null(&Kind::Tuple(&[SPOT_KIND, TYPE, U32])),
    ),
]);

/// `node-capacity` rows.
pub const NODE_CAPACITY: Kind = Kind::Obj(&[
    VERSION,
    ("actors", U64),
    ("spots", U64),
    (
        "spotTypes",
        Kind::Arr(&Kind::Obj(&[
            ("objectKind", SPOT_KIND),
            ("stableType", TYPE),
            ("count", U64),
        ])),
    ),
]);

/// `spot-per-actor-move` rows.
pub const PER_ACTOR_MOVE: Kind = Kind::Obj(&[
    VERSION,
    ("spot", NAME),
    ("objectGeneration", Kind::Dec(1)),
    ("sourceOwnerId", OWNER),
    ("sourceLeaseGeneration", Kind::Dec(1)),
    ("sourceMeshName", NAME),
    ("sourceRoutingIdHex", RID),
    ("targetOwnerId", OWNER),
    ("targetLeaseGeneration", Kind::Dec(1)),
    ("targetMeshName", NAME),
    ("targetRoutingIdHex", RID),
    (
        "operation",
        Kind::Text(is_hex32_nonzero, "32 lowercase hex digits, not all zero"),
    ),
    ("total", U32),
    ("sourceActors", U32),
    ("targetActors", U32),
]);

/// A codec error as a mismatch naming its field.
pub fn codec_mismatch(e: &CodecError) -> Mismatch {
    match e {
        CodecError::Json { offset, reason } => {
            Mismatch::at("bytes", *offset, "canonical JSON", *reason)
        }
        CodecError::UnsupportedRecordVersion { found } => Mismatch::new(
            "recordVersion",
            "1 (the only version this runtime writes)",
            format!("unknown version tag {found}"),
        ),
        CodecError::MissingField { field } => {
            Mismatch::new(field.clone(), "the member", "no such member")
        }
        CodecError::UnknownField { field } => Mismatch::new(
            field.clone(),
            "no such member (unknown field)",
            "an unknown member",
        ),
        CodecError::DuplicateField { field } => {
            Mismatch::new(field.clone(), "the member once", "a duplicate member")
        }
        CodecError::InvalidField { field, reason } => {
            Mismatch::new(field.clone(), "a valid value", reason.clone())
        }
        CodecError::UnsupportedFormatTag { format, tag } => Mismatch::at(
            "tag",
            0,
            format!("the {format} format tag"),
            format!("unknown version tag 0x{tag:02x}"),
        ),
        other => Mismatch::new("value", "a valid record", other.to_string()),
    }
}

/// `expected` (the canonical re-encoding) must be the stored bytes.
fn same(expected: Result<Vec<u8>, CodecError>, found: &[u8]) -> Result<(), Mismatch> {
    let expected = expected.map_err(|e| codec_mismatch(&e))?;
    schema::canonical_bytes(&expected, found)
}

fn key_matches(expected: &[u8], key: &[u8]) -> Result<(), Mismatch> {
    if expected == key {
        Ok(())
    } else {
        Err(Mismatch::new(
            "key",
            format!(
                "{:?} (the key the record's own fields give)",
                show_bytes(expected)
            ),
            format!("\"{}\"", show_bytes(key)),
        ))
    }
}

fn key_part(key: &[u8], i: usize) -> &str {
    std::str::from_utf8(key)
        .ok()
        .and_then(|t| t.split('\0').nth(i))
        .unwrap_or("")
}

/// Flattens a JSON value into `(path, value)` pairs.
pub fn flatten(path: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                flatten(&join(k), v, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{path}[{i}]"), v, out);
            }
        }
        other => out.push((path.to_owned(), other.to_string())),
    }
}

fn json_fields(bytes: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        flatten("", &v, &mut out);
    }
    out
}

/// The authority payload: empty, or `m1` followed by a JSON object (membership: `spot`,
/// `entry`, optional `spotWide`, optional `relocation` stage mark). Other payload forms (the
/// cold-activation recovery root an Instance Spot carries until its first message completes)
/// are framework-private and not judged.
fn check_payload(payload: &[u8]) -> Result<(), Mismatch> {
    let Some(json) = payload.strip_prefix(b"m1") else {
        return Ok(());
    };
    let v: Value = serde_json::from_slice(json)
        .map_err(|e| schema::json_error(json, &e).within("payload(m1)", Some(2)))?;
    let Value::Object(map) = &v else {
        return Err(Mismatch::new("payload(m1)", "a JSON object", v.to_string()));
    };
    match map.get("spot") {
        Some(Value::String(s)) if is_name(s) => {}
        other => {
            return Err(Mismatch::new(
                "payload(m1).spot",
                "a SpotId string",
                other.map_or("no such member".to_owned(), Value::to_string),
            ));
        }
    }
    if !matches!(map.get("entry"), Some(Value::Bool(_))) {
        return Err(Mismatch::new(
            "payload(m1).entry",
            "a boolean",
            "something else",
        ));
    }
    if map.get("spotWide").is_some_and(|v| !v.is_boolean()) {
        return Err(Mismatch::new(
            "payload(m1).spotWide",
            "a boolean",
            "something else",
        ));
    }
    if let Some(mark) = map.get("relocation") {
        match mark.get("stage").and_then(Value::as_str) {
            Some(_) => {}
            None => {
                return Err(Mismatch::new(
                    "payload(m1).relocation.stage",
                    "a stage name string",
                    mark.to_string(),
                ));
            }
        }
    }
    Ok(())
}

/// Checks the value of a record of `family` under logical key `key` against its canonical
/// form; on success, the value decoded field by field.
pub fn check_value(family: Family, key: &[u8], bytes: &[u8]) -> Result<Decoded, Mismatch> {
    // A record that names its own key: decodes, re-encodes to the same bytes, names `key`.
    macro_rules! keyed_record {
        ($record:ty) => {{
            let r = <$record>::decode(bytes).map_err(|e| codec_mismatch(&e))?;
            same(r.encode(), bytes)?;
            key_matches(r.key().as_bytes(), key)?;
            json_fields(bytes)
        }};
    }
    let fields = match family {
        Family::MeshNode => keyed_record!(MeshNodeRecord),
        Family::ClientServer => keyed_record!(ClientServerRecord),
        Family::FanoutPublisher => keyed_record!(FanoutPublisherRecord),
        Family::OwnerLease => keyed_record!(OwnerLeaseRecord),
        Family::Authority => {
            let r = AuthorityRecord::decode(bytes).map_err(|e| codec_mismatch(&e))?;
            same(r.encode(), bytes)?;
            let id = ObjectId::new(key_part(key, 2))
                .map_err(|_| Mismatch::new("key[2]", "an id", key_part(key, 2)))?;
            key_matches(r.key(&id).as_bytes(), key)?;
            check_payload(&r.payload)?;
            let mut f = json_fields(bytes);
            f.push((
                "payload (decoded)".into(),
                format!("\"{}\"", show_bytes(&r.payload)),
            ));
            f
        }
        Family::CreationTerminal => {
            let t = CreationTerminal::decode(bytes).map_err(|e| codec_mismatch(&e))?;
            same(t.encode(), bytes)?;
            vec![
                ("outcome".into(), format!("{:?}", t.outcome)),
                (
                    "objectKind".into(),
                    t.object_ref.object_kind.as_str().to_owned(),
                ),
                (
                    "objectGeneration".into(),
                    t.object_ref.object_generation.get().to_string(),
                ),
                ("id".into(), t.object_ref.id.as_str().to_owned()),
                (
                    "meshName".into(),
                    t.object_ref.mesh_name.as_str().to_owned(),
                ),
                ("nodeRid".into(), t.object_ref.node_rid.to_hex()),
                (
                    "requestSha256".into(),
                    zlink_codec::lower_hex(&t.request_sha256),
                ),
                (
                    "reply".into(),
                    t.reply
                        .as_ref()
                        .map_or("none".into(), |r| format!("{} bytes", r.len())),
                ),
            ]
        }
        Family::Counter
        | Family::MeshChange
        | Family::ClientServerChange
        | Family::FanoutPublisherChange => {
            let v = zlink_codec::counter::parse(bytes).map_err(|e| {
                Mismatch::new(
                    "value",
                    "bare canonical decimal in 1..=2^63-1",
                    format!("{:?} ({e})", show_bytes(bytes)),
                )
            })?;
            vec![("value".into(), v.get().to_string())]
        }
        Family::NodeCapacity => {
            schema::check_row(bytes, NODE_CAPACITY)?;
            let row = CapacityRow::decode(bytes)
                .map_err(|e| Mismatch::new("value", "a valid node-capacity row", e.to_string()))?;
            let again = row
                .encode()
                .map_err(|e| Mismatch::new("value", "an encodable row", e.to_string()))?;
            // spotTypes are written sorted by (kind, stable type), each once.
            schema::canonical_bytes(&again, bytes)?;
            json_fields(bytes)
        }
        Family::LocationIndex => {
            schema::check_row(bytes, LOCATION_INDEX)?;
            json_fields(bytes)
        }
        Family::RunObjects => {
            schema::check_row(bytes, RUN_OBJECTS)?;
            json_fields(bytes)
        }
        Family::CreationDeadline => {
            schema::check_row(bytes, CREATION_DEADLINE)?;
            json_fields(bytes)
        }
        Family::CapacityReservation => {
            let v = schema::check_row(bytes, CAPACITY_RESERVATION)?;
            let id = v.get("reservationId").and_then(Value::as_str).unwrap_or("");
            if id != key_part(key, 1) {
                return Err(Mismatch::new("reservationId", key_part(key, 1), id));
            }
            json_fields(bytes)
        }
        Family::PerActorMove => {
            let v = schema::check_row(bytes, PER_ACTOR_MOVE)?;
            PerActorMoveRecord::decode(bytes).map_err(|_| {
                Mismatch::new(
                    "sourceActors+targetActors",
                    "the sum equal to total",
                    format!(
                        "{} + {} against {}",
                        v.get("sourceActors").unwrap_or(&Value::Null),
                        v.get("targetActors").unwrap_or(&Value::Null),
                        v.get("total").unwrap_or(&Value::Null)
                    ),
                )
            })?;
            let spot = v.get("spot").and_then(Value::as_str).unwrap_or("");
            if spot != key_part(key, 1) {
                return Err(Mismatch::new("spot", key_part(key, 1), spot));
            }
            json_fields(bytes)
        }
        Family::SpotInventory => {
            let root = InventoryRoot::decode(bytes).map_err(|e| {
                Mismatch::new(
                    "value",
                    "an inventory root (format version 1)",
                    e.to_string(),
                )
            })?;
            schema::canonical_bytes(&root.encode(), bytes)?;
            vec![
                ("height".into(), root.height().to_string()),
                ("totalCount".into(), root.total_count().to_string()),
                ("leafPages".into(), root.page_count().to_string()),
                ("indexPages".into(), root.index_page_count().to_string()),
                ("contentChecksum".into(), root.content_checksum().to_hex()),
                ("start".into(), root.start().to_hex()),
                ("startLen".into(), root.start_len().to_string()),
            ]
        }
    };
    Ok(Decoded { family, fields })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(key: &str, bytes: &[u8]) -> Result<Decoded, Mismatch> {
        let family = crate::family::classify(key.as_bytes())?;
        check_value(family, key.as_bytes(), bytes)
    }

    #[test]
    fn the_documented_runtime_rows_pass() {
        let ok = [
            ("location-index\0actor\0counter\0a", &br#"{"recordVersion":1,"objectGeneration":"12"}"#[..]),
            ("node-capacity\0main\x0001", br#"{"recordVersion":1,"actors":3,"spots":1,"spotTypes":[{"objectKind":"userSpot","stableType":"room","count":1}]}"#),
            ("mesh-change\0main", b"7"),
            ("zlink:v11:owner-counter", b"2"),
            ("creation-deadline\0actor\0a", br#"{"recordVersion":1,"objectGeneration":"3","sourceRoutingIdHex":"01","sourceLeaseGeneration":"2","operationId":"000000000000002a0000000000000001","deadline":"1700000000000","abandonedAfter":"1700000030000"}"#),
        ];
        for (key, bytes) in ok {
            assert!(
                check(key, bytes).is_ok(),
                "{key:?}: {:?}",
                check(key, bytes)
            );
        }
    }

    #[test]
    fn broken_runtime_rows_name_their_field() {
        let bad = [
            ("location-index\0actor\0counter\0a", &br#"{"recordVersion":1,"objectGeneration":12}"#[..], "objectGeneration"),
            ("location-index\0actor\0counter\0a", br#"{"recordVersion":9,"objectGeneration":"12"}"#, "recordVersion"),
            ("node-capacity\0main\x0001", br#"{"recordVersion":1,"actors":3,"spots":1,"spotTypes":[{"objectKind":"actor","stableType":"room","count":1}]}"#, "spotTypes[0].objectKind"),
            ("mesh-change\0main", b"07", "value"),
            ("zlink:v11:owner-counter", b"0", "value"),
            ("creation-deadline\0actor\0a", br#"{"recordVersion":1,"objectGeneration":"3","sourceRoutingIdHex":"0A","sourceLeaseGeneration":"2","operationId":"000000000000002a0000000000000001","deadline":"1","abandonedAfter":"2"}"#, "sourceRoutingIdHex"),
            ("owner-lease\0o", br#"{"recordVersion":1,"ownerId":"o","leaseGeneration":"1"} "#, "bytes"),
            ("owner-lease\0o", br#"{"recordVersion":1,"ownerId":"p","leaseGeneration":"1"}"#, "key"),
            ("owner-lease\0o", br#"{"recordVersion":2,"ownerId":"o","leaseGeneration":"1"}"#, "recordVersion"),
            ("spot-inventory\0room", b"garbage", "value"),
        ];
        for (key, bytes, field) in bad {
            let got = check(key, bytes).map(|_| ()).map_err(|m| m.field);
            assert_eq!(
                got,
                Err(field.to_owned()),
                "{key:?} {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn the_golden_owner_lease_record_passes() {
        let r = check(
            "owner-lease\0owner-a",
            br#"{"recordVersion":1,"ownerId":"owner-a","leaseGeneration":"42"}"#,
        )
        .expect("canonical");
        assert_eq!(r.family, Family::OwnerLease);
        assert!(
            r.fields
                .contains(&("leaseGeneration".into(), "\"42\"".into()))
        );
    }
}
