//! Strict decoding and the spec bounds of the store records (spec 21 §3.4, §4): each bound
//! is tested at the bound and one past it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use zlink_codec::records::{
    ActivationConcurrency, Allocation, AllocationCapacity, AllocationState, ClientServerDescriptor,
    DescriptorCapacity, DescriptorRef, HostState, MAX_LIST_ENTRIES, MAX_RECORD_BYTES,
    MeshNodeDescriptor, ObjectCapability, ObjectKind, ObjectRole, RelocationPolicy, SlotUsage,
    SpotTypeSlots, SpotTypeUsage,
};
use zlink_codec::{
    AuthorityRecord, ChannelName, ClientServerRecord, CodecError, CodecErrorKind, Generation,
    MeshName, MeshNodeRecord, ObjectId, OwnerId, RoutingId, StableType,
};

fn g(v: u64) -> Generation {
    Generation::new(v).unwrap()
}

fn capability() -> ObjectCapability {
    ObjectCapability {
        object_kind: ObjectKind::Actor,
        stable_type: StableType::new("chat").unwrap(),
        policy: RelocationPolicy::Disabled,
        has_snapshot_adapter: false,
        limit: 0,
    }
}

fn spot_type() -> SpotTypeUsage {
    SpotTypeUsage {
        object_kind: ObjectKind::UserSpot,
        stable_type: StableType::new("game").unwrap(),
        active: 2,
        reserved: 0,
        limit: 100,
    }
}

fn mesh_node() -> MeshNodeRecord {
    MeshNodeRecord {
        owner_id: OwnerId::new("owner-a").unwrap(),
        lease_generation: g(5),
        descriptor_revision: g(3),
        descriptor: MeshNodeDescriptor {
            mesh_name: MeshName::new("main").unwrap(),
            routing_id: RoutingId::new(vec![1, 2, 3, 4]).unwrap(),
            lifecycle_generation: g(1),
            endpoint: "tcp://node-a:5000".into(),
            entry_spot_id: Some(ObjectId::new("entry-1").unwrap()),
            channel_weights: BTreeMap::from([(ChannelName::new("billing").unwrap(), 100)]),
            application_version: 2,
            object_capabilities: vec![capability()],
            object_role: ObjectRole::Server,
            placement_weight: 100,
            capacity: DescriptorCapacity {
                actors: SlotUsage {
                    active: 3,
                    reserved: 1,
                    limit: 0,
                },
                spots: SlotUsage {
                    active: 2,
                    reserved: 0,
                    limit: 100,
                },
                spot_types: vec![spot_type()],
            },
            activation_concurrency: ActivationConcurrency {
                active: 0,
                limit: 128,
            },
            maintenance_wave: None,
            state: HostState::Serving,
            security_identity: "node-a-identity".into(),
            updated_at_epoch_ms: 1_700_000_000_000,
        },
    }
}

fn client_server() -> ClientServerRecord {
    ClientServerRecord {
        owner_id: OwnerId::new("owner-b").unwrap(),
        lease_generation: g(2),
        descriptor_revision: g(4),
        descriptor: ClientServerDescriptor {
            channel_name: ChannelName::new("chat-channel").unwrap(),
            server_routing_id: RoutingId::new(vec![1, 2, 3, 4]).unwrap(),
            lifecycle_generation: g(1),
            endpoint: "tcp://server-a:6000".into(),
            weight: 100,
            state: HostState::Serving,
            security_identity: "server-a-identity".into(),
            updated_at_epoch_ms: 1_700_000_001_000,
        },
    }
}

fn authority(kind: ObjectKind) -> AuthorityRecord {
    AuthorityRecord {
        payload: vec![0xde, 0xad],
        object_generation: g(7),
        authority_owner_generation: g(3),
        owner_id: OwnerId::new("owner-a").unwrap(),
        owner_lease_generation: g(5),
        allocation: Allocation {
            state: AllocationState::Active,
            object_kind: kind,
            stable_type: StableType::new("game").unwrap(),
            descriptor: DescriptorRef {
                mesh_name: MeshName::new("main").unwrap(),
                routing_id: RoutingId::new(vec![1, 2, 3, 4]).unwrap(),
            },
            descriptor_lifecycle_generation: g(1),
            capacity: AllocationCapacity {
                actors: u32::from(!kind.is_spot()),
                spots: u32::from(kind.is_spot()),
                spot_type: kind.is_spot().then(|| SpotTypeSlots {
                    object_kind: kind,
                    stable_type: StableType::new("game").unwrap(),
                    count: 1,
                }),
            },
        },
        pending_creation: None,
    }
}

fn json(r: &MeshNodeRecord) -> String {
    String::from_utf8(r.encode().unwrap()).unwrap()
}

fn replace_once(s: &str, from: &str, to: &str) -> String {
    assert!(s.contains(from), "{from} not in {s}");
    s.replacen(from, to, 1)
}

#[test]
fn descriptor_of_exactly_one_mib_is_accepted_and_one_byte_more_rejected() {
    let mut r = mesh_node();
    r.descriptor.endpoint.clear();
    let base = r.encode().unwrap().len();
    r.descriptor.endpoint = "e".repeat(MAX_RECORD_BYTES - base);
    let bytes = r.encode().unwrap();
    assert_eq!(bytes.len(), MAX_RECORD_BYTES);
    assert_eq!(MeshNodeRecord::decode(&bytes).unwrap(), r);

    r.descriptor.endpoint.push('e');
    assert!(matches!(r.encode(), Err(CodecError::TooLarge { .. })));
    let over = replace_once(
        std::str::from_utf8(&bytes).unwrap(),
        "\"endpoint\":\"",
        "\"endpoint\":\"e",
    );
    assert_eq!(over.len(), MAX_RECORD_BYTES + 1);
    assert!(matches!(
        MeshNodeRecord::decode(over.as_bytes()),
        Err(CodecError::TooLarge { .. })
    ));
}

#[test]
fn object_capabilities_of_1024_entries_are_accepted_and_1025_rejected() {
    let mut r = mesh_node();
    r.descriptor.object_capabilities = vec![capability(); MAX_LIST_ENTRIES];
    let at_bound = json(&r);
    assert_eq!(MeshNodeRecord::decode(at_bound.as_bytes()).unwrap(), r);
    r.descriptor.object_capabilities.push(capability());
    assert!(matches!(
        r.encode(),
        Err(CodecError::TooManyEntries { max: 1024, .. })
    ));
    let entry = r#"{"objectKind":"actor","stableType":"chat","policy":"disabled","hasSnapshotAdapter":false,"limit":0}"#;
    let over = replace_once(
        &at_bound,
        "\"objectCapabilities\":[",
        &format!("\"objectCapabilities\":[{entry},"),
    );
    assert!(matches!(
        MeshNodeRecord::decode(over.as_bytes()),
        Err(CodecError::TooManyEntries { actual: 1025, .. })
    ));
}

#[test]
fn spot_types_of_1024_entries_are_accepted_and_1025_rejected() {
    let mut r = mesh_node();
    r.descriptor.capacity.spot_types = vec![spot_type(); MAX_LIST_ENTRIES];
    let at_bound = json(&r);
    assert_eq!(MeshNodeRecord::decode(at_bound.as_bytes()).unwrap(), r);
    r.descriptor.capacity.spot_types.push(spot_type());
    assert!(matches!(r.encode(), Err(CodecError::TooManyEntries { .. })));
    let entry =
        r#"{"objectKind":"userSpot","stableType":"game","active":2,"reserved":0,"limit":100}"#;
    let over = replace_once(
        &at_bound,
        "\"spotTypes\":[",
        &format!("\"spotTypes\":[{entry},"),
    );
    assert!(matches!(
        MeshNodeRecord::decode(over.as_bytes()),
        Err(CodecError::TooManyEntries { actual: 1025, .. })
    ));
}

#[test]
fn weight_10000_is_accepted_and_10001_rejected() {
    let mut r = mesh_node();
    r.descriptor.placement_weight = 10_000;
    let at_bound = json(&r);
    assert!(MeshNodeRecord::decode(at_bound.as_bytes()).is_ok());
    r.descriptor.placement_weight = 10_001;
    assert!(r.encode().is_err());
    let over = replace_once(
        &at_bound,
        "\"placementWeight\":10000",
        "\"placementWeight\":10001",
    );
    assert!(MeshNodeRecord::decode(over.as_bytes()).is_err());

    let mut c = client_server();
    c.descriptor.weight = 10_001;
    assert!(c.encode().is_err());
    let mut m = mesh_node();
    m.descriptor
        .channel_weights
        .insert(ChannelName::new("x").unwrap(), 10_001);
    assert!(m.encode().is_err());
}

#[test]
fn slot_counts_of_2_pow_31_minus_1_are_accepted_and_2_pow_31_rejected() {
    let mut r = mesh_node();
    r.descriptor.capacity.actors.limit = i32::MAX as u32;
    let at_bound = json(&r);
    assert!(MeshNodeRecord::decode(at_bound.as_bytes()).is_ok());
    r.descriptor.capacity.actors.limit = 1 << 31;
    assert!(r.encode().is_err());
    let over = replace_once(&at_bound, "\"limit\":2147483647", "\"limit\":2147483648");
    assert!(MeshNodeRecord::decode(over.as_bytes()).is_err());

    let mut a = authority(ObjectKind::Actor);
    a.allocation.capacity.actors = i32::MAX as u32;
    assert!(AuthorityRecord::decode(&a.encode().unwrap()).is_ok());
    a.allocation.capacity.actors = 1 << 31;
    assert!(a.encode().is_err());
}

#[test]
fn each_descriptor_copy_must_match_the_top_level() {
    let base = json(&mesh_node());
    for (field, from, to) in [
        (
            "ownerId",
            "\"ownerId\":\"owner-a\",\"leaseGeneration\":\"5\",\"updated",
            "\"ownerId\":\"owner-x\",\"leaseGeneration\":\"5\",\"updated",
        ),
        (
            "leaseGeneration",
            "\"leaseGeneration\":\"5\",\"updated",
            "\"leaseGeneration\":\"6\",\"updated",
        ),
        (
            "descriptorRevision",
            "\"lifecycleGeneration\":\"1\",\"descriptorRevision\":\"3\"",
            "\"lifecycleGeneration\":\"1\",\"descriptorRevision\":\"4\"",
        ),
    ] {
        let changed = replace_once(&base, from, to);
        match MeshNodeRecord::decode(changed.as_bytes()) {
            Err(CodecError::CopyMismatch { field: f }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn values_outside_closed_sets_are_rejected() {
    let base = json(&mesh_node());
    for (from, to) in [
        ("\"state\":\"serving\"", "\"state\":\"Serving\""),
        ("\"state\":\"serving\"", "\"state\":\"running\""),
        ("\"objectRole\":\"server\"", "\"objectRole\":\"worker\""),
        ("\"objectKind\":\"actor\"", "\"objectKind\":\"entrySpot\""),
        ("\"policy\":\"disabled\"", "\"policy\":\"never\""),
        ("\"objectKind\":\"userSpot\"", "\"objectKind\":\"actor\""), // spotTypes holds Spot kinds
    ] {
        let changed = replace_once(&base, from, to);
        let e = MeshNodeRecord::decode(changed.as_bytes()).unwrap_err();
        assert_eq!(e.kind(), CodecErrorKind::InvalidInput, "{to}: {e}");
    }
    let a = String::from_utf8(authority(ObjectKind::UserSpot).encode().unwrap()).unwrap();
    for (from, to) in [
        ("\"state\":\"active\"", "\"state\":\"creating\""),
        (
            "\"objectKind\":\"userSpot\",\"stableType\":\"game\",\"descriptor\"",
            "\"objectKind\":\"spot\",\"stableType\":\"game\",\"descriptor\"",
        ),
    ] {
        let changed = replace_once(&a, from, to);
        assert!(AuthorityRecord::decode(changed.as_bytes()).is_err(), "{to}");
    }
}

#[test]
fn entry_spot_id_is_null_unless_the_role_is_server() {
    let mut r = mesh_node();
    r.descriptor.object_role = ObjectRole::Client;
    assert!(r.encode().is_err());
    r.descriptor.entry_spot_id = None;
    assert!(MeshNodeRecord::decode(&r.encode().unwrap()).is_ok());
    let bad = replace_once(
        &json(&mesh_node()),
        "\"objectRole\":\"server\"",
        "\"objectRole\":\"none\"",
    );
    assert!(MeshNodeRecord::decode(bad.as_bytes()).is_err());
}

#[test]
fn spot_type_is_null_for_an_actor_and_present_for_a_spot() {
    let actor = authority(ObjectKind::Actor);
    assert!(actor.encode().is_ok());
    let mut bad = actor.clone();
    bad.allocation.capacity.spot_type = authority(ObjectKind::UserSpot)
        .allocation
        .capacity
        .spot_type;
    assert!(bad.encode().is_err());
    let mut spot = authority(ObjectKind::InstanceSpot);
    assert!(AuthorityRecord::decode(&spot.encode().unwrap()).is_ok());
    spot.allocation.capacity.spot_type = None;
    assert!(spot.encode().is_err());
    let text = String::from_utf8(authority(ObjectKind::Actor).encode().unwrap()).unwrap();
    let changed = replace_once(
        &text,
        "\"spotType\":null",
        "\"spotType\":{\"objectKind\":\"userSpot\",\"stableType\":\"g\",\"count\":1}",
    );
    assert!(AuthorityRecord::decode(changed.as_bytes()).is_err());
}

#[test]
fn authority_key_segment_follows_the_object_kind() {
    let id = ObjectId::new("user:42").unwrap();
    assert_eq!(
        authority(ObjectKind::Actor).key(&id).as_str(),
        "authority\0actor\0user:42"
    );
    assert_eq!(
        authority(ObjectKind::UserSpot).key(&id).as_str(),
        "authority\0spot\0user:42"
    );
}

#[test]
fn payload_must_be_canonical_padded_standard_base64() {
    let text = String::from_utf8(authority(ObjectKind::Actor).encode().unwrap()).unwrap();
    assert!(text.contains("\"payload\":\"3q0=\""));
    for bad in ["3q0", "3q1=", "3q-=", "3q0=="] {
        let changed = replace_once(
            &text,
            "\"payload\":\"3q0=\"",
            &format!("\"payload\":\"{bad}\""),
        );
        assert!(
            AuthorityRecord::decode(changed.as_bytes()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn pending_creation_sha256_must_be_64_lowercase_hex() {
    let mut a = authority(ObjectKind::UserSpot);
    a.pending_creation =
        Some(zlink_codec::records::PendingCreation::for_request("reservation-1", b"req").unwrap());
    let text = String::from_utf8(a.encode().unwrap()).unwrap();
    assert_eq!(AuthorityRecord::decode(text.as_bytes()).unwrap(), a);
    let hex = zlink_codec::lower_hex(&a.pending_creation.as_ref().unwrap().request_sha256);
    for bad in [hex.to_uppercase(), hex[..62].to_owned(), format!("{hex}00")] {
        let changed = text.replace(&hex, &bad);
        assert!(
            AuthorityRecord::decode(changed.as_bytes()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn request_encoded_size_of_one_mib_is_accepted_and_one_more_rejected() {
    let mut a = authority(ObjectKind::Actor);
    a.pending_creation = Some(zlink_codec::records::PendingCreation {
        reservation_id: "r".into(),
        request_content_reference: "inline-v1:".into(),
        request_sha256: [0; 32],
        request_encoded_size: 1_048_576,
    });
    let text = String::from_utf8(a.encode().unwrap()).unwrap();
    assert!(AuthorityRecord::decode(text.as_bytes()).is_ok());
    let over = replace_once(
        &text,
        "\"requestEncodedSize\":1048576",
        "\"requestEncodedSize\":1048577",
    );
    assert!(AuthorityRecord::decode(over.as_bytes()).is_err());
    a.pending_creation.as_mut().unwrap().request_encoded_size = 1_048_577;
    assert!(a.encode().is_err());
}

#[test]
fn generation_strings_must_be_canonical_and_non_zero() {
    let base = String::from_utf8(client_server().encode().unwrap()).unwrap();
    for bad in [
        "\"02\"",
        "\"0\"",
        "\"+2\"",
        "\" 2\"",
        "2",
        "\"9223372036854775808\"",
    ] {
        let changed = base.replacen(
            "\"leaseGeneration\":\"2\"",
            &format!("\"leaseGeneration\":{bad}"),
            2,
        );
        assert!(
            ClientServerRecord::decode(changed.as_bytes()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn routing_ids_must_be_lowercase_hex() {
    let base = String::from_utf8(client_server().encode().unwrap()).unwrap();
    for bad in ["0102030A", "0102030", "0x0102", ""] {
        let changed = replace_once(&base, "\"01020304\"", &format!("\"{bad}\""));
        assert!(
            ClientServerRecord::decode(changed.as_bytes()).is_err(),
            "{bad:?}"
        );
    }
    let lower = replace_once(&base, "\"01020304\"", "\"0102030a\"");
    assert!(ClientServerRecord::decode(lower.as_bytes()).is_ok());
}

#[test]
fn unknown_duplicate_and_missing_members_are_rejected() {
    let base = String::from_utf8(client_server().encode().unwrap()).unwrap();
    let unknown = replace_once(
        &base,
        "\"weight\":100,",
        "\"weight\":100,\"generation\":\"9\",",
    );
    assert!(matches!(
        ClientServerRecord::decode(unknown.as_bytes()),
        Err(CodecError::UnknownField { .. })
    ));
    let duplicate = replace_once(&base, "\"weight\":100,", "\"weight\":100,\"weight\":100,");
    assert!(matches!(
        ClientServerRecord::decode(duplicate.as_bytes()),
        Err(CodecError::DuplicateField { .. })
    ));
    let missing = replace_once(&base, "\"weight\":100,", "");
    assert!(matches!(
        ClientServerRecord::decode(missing.as_bytes()),
        Err(CodecError::MissingField { .. })
    ));
}

#[test]
fn nulls_are_written_out() {
    let mut r = mesh_node();
    r.descriptor.object_role = ObjectRole::None;
    r.descriptor.entry_spot_id = None;
    let text = json(&r);
    assert!(text.contains("\"entrySpotId\":null"));
    assert!(text.contains("\"maintenanceWave\":null"));
    let a = String::from_utf8(authority(ObjectKind::Actor).encode().unwrap()).unwrap();
    assert!(a.ends_with("\"pendingCreation\":null}"));
}

#[test]
fn timestamps_of_2_pow_63_minus_1_are_accepted_and_2_pow_63_rejected() {
    let mut r = client_server();
    r.descriptor.updated_at_epoch_ms = i64::MAX as u64;
    let at_bound = String::from_utf8(r.encode().unwrap()).unwrap();
    assert_eq!(ClientServerRecord::decode(at_bound.as_bytes()).unwrap(), r);
    r.descriptor.updated_at_epoch_ms = 1 << 63;
    assert!(r.encode().is_err());
    let over = replace_once(
        &at_bound,
        "\"updatedAtEpochMs\":\"9223372036854775807\"",
        "\"updatedAtEpochMs\":\"9223372036854775808\"",
    );
    assert!(ClientServerRecord::decode(over.as_bytes()).is_err());
}
