//! Property tests: every record, counter, reference, key and terminal round-trips, and the
//! canonical JSON is read back identically by an independent JSON parser (serde_json).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::Value;
use zlink_codec::counter::{self, CounterValue};
use zlink_codec::records::{
    ActivationConcurrency, Allocation, AllocationCapacity, AllocationState, ClientServerDescriptor,
    DescriptorCapacity, DescriptorRecord, DescriptorRef, FanoutPublisherDescriptor, HostState,
    MeshNodeDescriptor, ObjectCapability, ObjectKind, ObjectRole, PendingCreation,
    RelocationPolicy, SlotUsage, SpotTypeSlots, SpotTypeUsage,
};
use zlink_codec::terminal::{CreationOutcome, CreationTerminal, ObjectRef};
use zlink_codec::{
    AuthorityKind, AuthorityRecord, ChannelName, ClientServerRecord, FanoutPublisherRecord,
    Generation, KeyParts, LogicalKey, MAX_U63, MeshName, MeshNodeRecord, ObjectId, OperationId,
    OwnerId, OwnerLeaseRecord, RoutingId, StableType, inline_ref,
};

/// Names: any printable text, plus the troublesome characters of JSON; no NUL; 1..=255 bytes.
fn name_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9:._-]{1,24}",
        "\\PC{1,24}",
        "[\"\\\\/\u{1}\u{1f}\u{7f}é€😀 a]{1,12}",
    ]
    .prop_filter("no NUL, at most 255 bytes", |s| {
        !s.contains('\0') && !s.is_empty() && s.len() <= 255
    })
}

fn free_text() -> impl Strategy<Value = String> {
    prop_oneof![any::<String>(), "[ -~]{0,40}"]
}

fn mesh() -> impl Strategy<Value = MeshName> {
    name_text().prop_map(|s| MeshName::new(s).unwrap())
}
fn channel() -> impl Strategy<Value = ChannelName> {
    name_text().prop_map(|s| ChannelName::new(s).unwrap())
}
fn owner() -> impl Strategy<Value = OwnerId> {
    name_text().prop_map(|s| OwnerId::new(s).unwrap())
}
fn object_id() -> impl Strategy<Value = ObjectId> {
    name_text().prop_map(|s| ObjectId::new(s).unwrap())
}
fn stable_type() -> impl Strategy<Value = StableType> {
    name_text().prop_map(|s| StableType::new(s).unwrap())
}
fn rid() -> impl Strategy<Value = RoutingId> {
    vec(any::<u8>(), 1..=32).prop_map(|b| RoutingId::new(b).unwrap())
}
fn generation() -> impl Strategy<Value = Generation> {
    prop_oneof![1..=100u64, 1..=MAX_U63, Just(MAX_U63)].prop_map(|g| Generation::new(g).unwrap())
}
fn decimal() -> impl Strategy<Value = u64> {
    prop_oneof![0..=10u64, 0..=MAX_U63]
}
fn slots() -> impl Strategy<Value = u32> {
    prop_oneof![0..=10u32, 0..=i32::MAX as u32]
}
fn weight() -> impl Strategy<Value = u16> {
    0..=10_000u16
}
fn spot_kind() -> impl Strategy<Value = ObjectKind> {
    prop_oneof![Just(ObjectKind::UserSpot), Just(ObjectKind::InstanceSpot)]
}
fn any_kind() -> impl Strategy<Value = ObjectKind> {
    prop::sample::select(ObjectKind::ALL)
}
fn host_state() -> impl Strategy<Value = HostState> {
    prop::sample::select(HostState::ALL)
}

fn usage() -> impl Strategy<Value = SlotUsage> {
    (slots(), slots(), slots()).prop_map(|(active, reserved, limit)| SlotUsage {
        active,
        reserved,
        limit,
    })
}

fn mesh_node() -> impl Strategy<Value = MeshNodeDescriptor> {
    let capabilities = vec(
        (
            any_kind(),
            stable_type(),
            prop::sample::select(RelocationPolicy::ALL),
            any::<bool>(),
            slots(),
        )
            .prop_map(
                |(object_kind, stable_type, policy, has_snapshot_adapter, limit)| {
                    ObjectCapability {
                        object_kind,
                        stable_type,
                        policy,
                        has_snapshot_adapter,
                        limit,
                    }
                },
            ),
        0..4,
    );
    let spot_types = vec(
        (spot_kind(), stable_type(), slots(), slots(), slots()).prop_map(
            |(object_kind, stable_type, active, reserved, limit)| SpotTypeUsage {
                object_kind,
                stable_type,
                active,
                reserved,
                limit,
            },
        ),
        0..4,
    );
    let role_and_entry = prop::sample::select(ObjectRole::ALL).prop_flat_map(|role| {
        let entry = if role == ObjectRole::Server {
            option::of(object_id()).boxed()
        } else {
            Just(None).boxed()
        };
        (Just(role), entry)
    });
    (
        (mesh(), rid(), generation(), free_text(), role_and_entry),
        (
            btree_map(channel(), weight(), 0..4),
            decimal(),
            capabilities,
            weight(),
        ),
        (usage(), usage(), spot_types, slots(), slots()),
        (
            option::of(free_text()),
            host_state(),
            free_text(),
            decimal(),
        ),
    )
        .prop_map(
            |(
                (
                    mesh_name,
                    routing_id,
                    lifecycle_generation,
                    endpoint,
                    (object_role, entry_spot_id),
                ),
                (channel_weights, application_version, object_capabilities, placement_weight),
                (actors, spots, spot_types, ac_active, ac_limit),
                (maintenance_wave, state, security_identity, updated_at_epoch_ms),
            )| MeshNodeDescriptor {
                mesh_name,
                routing_id,
                lifecycle_generation,
                endpoint,
                entry_spot_id,
                channel_weights,
                application_version,
                object_capabilities,
                object_role,
                placement_weight,
                capacity: DescriptorCapacity {
                    actors,
                    spots,
                    spot_types,
                },
                activation_concurrency: ActivationConcurrency {
                    active: ac_active,
                    limit: ac_limit,
                },
                maintenance_wave,
                state,
                security_identity,
                updated_at_epoch_ms,
            },
        )
}

fn client_server() -> impl Strategy<Value = ClientServerDescriptor> {
    (
        channel(),
        rid(),
        generation(),
        free_text(),
        weight(),
        host_state(),
        free_text(),
        decimal(),
    )
        .prop_map(
            |(
                channel_name,
                server_routing_id,
                lifecycle_generation,
                endpoint,
                weight,
                state,
                security_identity,
                updated_at_epoch_ms,
            )| ClientServerDescriptor {
                channel_name,
                server_routing_id,
                lifecycle_generation,
                endpoint,
                weight,
                state,
                security_identity,
                updated_at_epoch_ms,
            },
        )
}

fn fanout() -> impl Strategy<Value = FanoutPublisherDescriptor> {
    (
        channel(),
        rid(),
        generation(),
        free_text(),
        host_state(),
        free_text(),
        decimal(),
    )
        .prop_map(
            |(
                channel_name,
                publisher_routing_id,
                lifecycle_generation,
                endpoint,
                state,
                security_identity,
                updated_at_epoch_ms,
            )| FanoutPublisherDescriptor {
                channel_name,
                publisher_routing_id,
                lifecycle_generation,
                endpoint,
                state,
                security_identity,
                updated_at_epoch_ms,
            },
        )
}

fn record<D: std::fmt::Debug + Clone>(
    d: impl Strategy<Value = D>,
) -> impl Strategy<Value = DescriptorRecord<D>> {
    (owner(), generation(), generation(), d).prop_map(
        |(owner_id, lease_generation, descriptor_revision, descriptor)| DescriptorRecord {
            owner_id,
            lease_generation,
            descriptor_revision,
            descriptor,
        },
    )
}

fn authority() -> impl Strategy<Value = AuthorityRecord> {
    let kind_and_spot_type = any_kind().prop_flat_map(|kind| {
        let spot_type = if kind.is_spot() {
            (spot_kind(), stable_type(), slots())
                .prop_map(|(object_kind, stable_type, count)| {
                    Some(SpotTypeSlots {
                        object_kind,
                        stable_type,
                        count,
                    })
                })
                .boxed()
        } else {
            Just(None).boxed()
        };
        (Just(kind), spot_type)
    });
    let pending = option::of(
        (free_text(), vec(any::<u8>(), 0..200))
            .prop_map(|(id, req)| PendingCreation::for_request(id, &req).unwrap()),
    );
    (
        (
            vec(any::<u8>(), 0..100),
            generation(),
            generation(),
            owner(),
            generation(),
        ),
        (
            prop::sample::select(AllocationState::ALL),
            kind_and_spot_type,
            stable_type(),
            mesh(),
            rid(),
            generation(),
            slots(),
            slots(),
        ),
        pending,
    )
        .prop_map(
            |(
                (
                    payload,
                    object_generation,
                    authority_owner_generation,
                    owner_id,
                    owner_lease_generation,
                ),
                (
                    state,
                    (object_kind, spot_type),
                    stable_type,
                    mesh_name,
                    routing_id,
                    lifecycle,
                    actors,
                    spots,
                ),
                pending_creation,
            )| AuthorityRecord {
                payload,
                object_generation,
                authority_owner_generation,
                owner_id,
                owner_lease_generation,
                allocation: Allocation {
                    state,
                    object_kind,
                    stable_type,
                    descriptor: DescriptorRef {
                        mesh_name,
                        routing_id,
                    },
                    descriptor_lifecycle_generation: lifecycle,
                    capacity: AllocationCapacity {
                        actors,
                        spots,
                        spot_type,
                    },
                },
                pending_creation,
            },
        )
}

/// Our bytes are valid JSON for an independent parser, without whitespace.
fn independent_view(bytes: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(bytes).unwrap();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn mesh_node_record_round_trips(r in record(mesh_node())) {
        let bytes = r.encode().unwrap();
        let back = MeshNodeRecord::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(back.encode().unwrap(), bytes.clone());
        let v = independent_view(&bytes);
        prop_assert_eq!(v["descriptor"]["endpoint"].as_str(), Some(r.descriptor.endpoint.as_str()));
        prop_assert_eq!(v["descriptor"]["meshName"].as_str(), Some(r.descriptor.mesh_name.as_str()));
        prop_assert_eq!(v["descriptor"]["ownerId"].as_str(), Some(r.owner_id.as_str()));
        let lease = r.lease_generation.to_string();
        prop_assert_eq!(v["leaseGeneration"].as_str(), Some(lease.as_str()));
        let weights: BTreeMap<String, u64> = v["descriptor"]["channelWeights"]
            .as_object().unwrap().iter().map(|(k, w)| (k.clone(), w.as_u64().unwrap())).collect();
        prop_assert_eq!(weights.len(), r.descriptor.channel_weights.len());
        prop_assert_eq!(r.key(), LogicalKey::mesh_node(&r.descriptor.mesh_name, &r.descriptor.routing_id));
    }

    #[test]
    fn client_server_record_round_trips(r in record(client_server())) {
        let bytes = r.encode().unwrap();
        let back = ClientServerRecord::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(back.encode().unwrap(), bytes.clone());
        let v = independent_view(&bytes);
        prop_assert_eq!(v["descriptor"]["securityIdentity"].as_str(), Some(r.descriptor.security_identity.as_str()));
        prop_assert_eq!(v["descriptor"]["weight"].as_u64(), Some(u64::from(r.descriptor.weight)));
    }

    #[test]
    fn fanout_publisher_record_round_trips(r in record(fanout())) {
        let bytes = r.encode().unwrap();
        let back = FanoutPublisherRecord::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(back.encode().unwrap(), bytes.clone());
        let v = independent_view(&bytes);
        prop_assert_eq!(v["descriptor"]["channelName"].as_str(), Some(r.descriptor.channel_name.as_str()));
    }

    #[test]
    fn owner_lease_record_round_trips(owner_id in owner(), lease_generation in generation()) {
        let r = OwnerLeaseRecord { owner_id, lease_generation };
        let bytes = r.encode().unwrap();
        prop_assert_eq!(OwnerLeaseRecord::decode(&bytes).unwrap(), r.clone());
        let v = independent_view(&bytes);
        prop_assert_eq!(v["ownerId"].as_str(), Some(r.owner_id.as_str()));
    }

    #[test]
    fn authority_record_round_trips(r in authority()) {
        let bytes = r.encode().unwrap();
        let back = AuthorityRecord::decode(&bytes).unwrap();
        prop_assert_eq!(&back, &r);
        prop_assert_eq!(back.encode().unwrap(), bytes.clone());
        let v = independent_view(&bytes);
        prop_assert_eq!(v["allocation"]["stableType"].as_str(), Some(r.allocation.stable_type.as_str()));
        if let Some(p) = &r.pending_creation {
            prop_assert!(p.verify_request().is_ok());
        }
    }

    #[test]
    fn descriptor_copy_mismatch_is_rejected(r in record(client_server()), other in generation()) {
        prop_assume!(other != r.lease_generation);
        let bytes = String::from_utf8(r.encode().unwrap()).unwrap();
        let top = format!("\"leaseGeneration\":\"{}\",\"descriptorRevision\"", r.lease_generation);
        let changed = bytes.replacen(&top, &format!("\"leaseGeneration\":\"{other}\",\"descriptorRevision\""), 1);
        prop_assert!(ClientServerRecord::decode(changed.as_bytes()).is_err());
    }

    #[test]
    fn counter_format_and_parse_round_trip(v in 1..=MAX_U63) {
        let c = CounterValue::new(v).unwrap();
        prop_assert_eq!(counter::parse(&counter::format(c)).unwrap(), c);
        let leading_zero = format!("0{v}");
        prop_assert!(counter::parse(leading_zero.as_bytes()).is_err());
        let signed = format!("+{v}");
        prop_assert!(counter::parse(signed.as_bytes()).is_err());
        let spaced = format!("{v} ");
        prop_assert!(counter::parse(spaced.as_bytes()).is_err());
    }

    #[test]
    fn counter_block_issues_v_to_v_plus_n_minus_1(v in 1..=MAX_U63, n in 1..=64u64) {
        let row = v.to_string();
        match counter::issue_block(Some(row.as_bytes()), n) {
            Ok(issued) => {
                prop_assert!(v + n <= MAX_U63);
                prop_assert_eq!(issued.first().get(), v);
                prop_assert_eq!(issued.last().get(), v + n - 1);
                prop_assert_eq!(issued.values().count() as u64, n);
                prop_assert_eq!(issued.stored_bytes(), (v + n).to_string().into_bytes());
                prop_assert!(issued.last().get() <= counter::MAX_ISSUED);
            }
            Err(e) => {
                prop_assert!(v + n > MAX_U63);
                prop_assert_eq!(e.kind(), zlink_codec::CodecErrorKind::GenerationExhausted);
            }
        }
    }

    #[test]
    fn issuing_repeatedly_is_strictly_increasing_and_never_zero(start in 1..=MAX_U63 - 100, steps in 1..50usize) {
        let mut row = start.to_string().into_bytes();
        let mut last = 0;
        for _ in 0..steps {
            let issued = counter::issue(Some(&row)).unwrap();
            prop_assert!(issued.first().get() > last);
            last = issued.first().get();
            row = issued.stored_bytes();
        }
    }

    #[test]
    fn inline_reference_round_trips_and_verifies(bytes in vec(any::<u8>(), 0..600)) {
        let r = inline_ref::encode(&bytes);
        prop_assert!(r.starts_with("inline-v1:"));
        prop_assert!(!r.contains('='));
        let sha = inline_ref::sha256(&bytes);
        prop_assert_eq!(inline_ref::decode_verified(&r, bytes.len() as u64, &sha).unwrap(), bytes.clone());
        let mut wrong = sha;
        wrong[0] ^= 1;
        prop_assert!(inline_ref::decode_verified(&r, bytes.len() as u64, &wrong).is_err());
        prop_assert!(inline_ref::decode_verified(&r, bytes.len() as u64 + 1, &sha).is_err());
    }

    #[test]
    fn inline_reference_with_any_changed_body_character_is_rejected(
        bytes in vec(any::<u8>(), 1..200), pick in any::<prop::sample::Index>(), replacement in "[A-Za-z0-9_=+/:. -]",
    ) {
        let r = inline_ref::encode(&bytes);
        let body_start = "inline-v1:".len();
        let i = body_start + pick.index(r.len() - body_start);
        let mut changed = r.clone();
        changed.replace_range(i..=i, &replacement);
        prop_assume!(changed != r);
        let sha = inline_ref::sha256(&bytes);
        prop_assert!(inline_ref::decode_verified(&changed, bytes.len() as u64, &sha).is_err());
    }

    #[test]
    fn logical_keys_parse_back(m in mesh(), c in channel(), o in owner(), id in object_id(), r in rid(),
                               g in generation(), op in 1..=u128::MAX) {
        let keys = [
            LogicalKey::mesh_node(&m, &r),
            LogicalKey::owner_lease(&o),
            LogicalKey::client_server(&c, &r),
            LogicalKey::fanout_publisher(&c, &r),
            LogicalKey::authority(AuthorityKind::Actor, &id),
            LogicalKey::authority(AuthorityKind::Spot, &id),
            LogicalKey::creation_terminal(&r, g, OperationId::new(op).unwrap()),
        ];
        for k in keys {
            prop_assert!(k.as_bytes().len() <= zlink_codec::keys::MAX_KEY_LEN);
            prop_assert_eq!(KeyParts::parse(k.as_str()).unwrap().to_key(), k.clone());
            prop_assert_eq!(k.sha256_hex().len(), 64);
        }
    }

    #[test]
    fn creation_terminal_round_trips(
        outcome in prop_oneof![
            Just(CreationOutcome::Existing),
            Just(CreationOutcome::Created),
            Just(CreationOutcome::Rejected),
            "\\PC{0,40}".prop_map(|failure| CreationOutcome::Failed { failure }),
        ],
        object_kind in any_kind(), id in object_id(), g in generation(), m in mesh(), r in rid(),
        sha in any::<[u8; 32]>(), reply in option::of(vec(any::<u8>(), 0..300)),
    ) {
        let t = CreationTerminal {
            outcome,
            object_ref: ObjectRef { object_kind, id, object_generation: g, mesh_name: m, node_rid: r },
            request_sha256: sha,
            reply,
        };
        let bytes = t.encode().unwrap();
        prop_assert_eq!(CreationTerminal::decode(&bytes).unwrap(), t);
    }
}
