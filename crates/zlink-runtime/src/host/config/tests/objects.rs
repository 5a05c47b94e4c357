//! Object type registration rules (spec 06 §4, §15, §17, §23, §25): each rule one test, each
//! failing before any socket binds or Store request (these tests only build the plan).

use zlink_codec::records::{ObjectKind, ObjectRole, RelocationPolicy};

use super::*;
use crate::messaging::BoxError;
use crate::objects::{
    Actor, ActorStateAdapter, ActorType, ReadinessMode, RelocationChoice, Spot, SpotExecution,
    SpotType,
};

struct Counter(u64);
impl Actor for Counter {}

struct Room;
impl Spot for Room {}

struct CounterState;
impl ActorStateAdapter<Counter> for CounterState {
    fn capture(&self, a: &Counter) -> Result<Vec<u8>, BoxError> {
        Ok(a.0.to_be_bytes().to_vec())
    }
    fn restore(&self, bytes: &[u8]) -> Result<Counter, BoxError> {
        let b: [u8; 8] = bytes.try_into()?;
        Ok(Counter(u64::from_be_bytes(b)))
    }
}

fn counter(t: ActorType<Counter>) -> ActorType<Counter> {
    t.factory(|_| async { Ok(Counter(0)) })
}

fn room(t: SpotType<Room>) -> SpotType<Room> {
    t.factory(|_| async { Ok(Room) })
}

fn server_with(
    f: impl FnOnce(MeshNodeBuilder<u32>) -> MeshNodeBuilder<u32>,
) -> Result<ZLinkPlan<u32>, StartupError> {
    start_node(|n| f(n.object_role(ObjectRole::Server)))
}

#[test]
fn object_types_become_the_plan_with_their_one_policy_and_modes() {
    let plan = server_with(|n| {
        n.actor_type::<Counter>("counter", |t| counter(t).disable_relocation())
            .user_spot_type::<Room>("room", |t| room(t).disable_relocation())
            .user_spot_type::<Room>("lane", |t| {
                room(t)
                    .disable_relocation()
                    .execution(SpotExecution::PerActor)
            })
    })
    .unwrap();
    let types = plan.nodes()[0].object_types();
    assert_eq!(types.len(), 3);
    assert_eq!(types[0].kind(), ObjectKind::Actor);
    assert_eq!(types[0].relocation(), RelocationChoice::Disable);
    assert_eq!(types[0].relocation().policy(), RelocationPolicy::Disabled);
    assert_eq!(types[0].execution(), None);
    assert_eq!(types[1].execution(), Some(SpotExecution::SpotWide));
    assert_eq!(types[1].readiness(), Some(ReadinessMode::AnyTurnBoundary));
    assert_eq!(types[2].execution(), Some(SpotExecution::PerActor));
    assert_eq!(types[2].readiness(), None);
}

#[test]
fn object_type_on_a_non_server_fails_startup() {
    for role in [ObjectRole::None, ObjectRole::Client] {
        let err = start_node(|n| {
            n.object_role(role)
                .actor_type::<Counter>("counter", |t| counter(t).disable_relocation())
        })
        .unwrap_err();
        assert!(
            matches!(err, StartupError::ObjectTypeOnNonServer { role: r, .. } if r == role),
            "{err:?}"
        );
    }
}

#[test]
fn same_stable_type_twice_fails_startup_whatever_the_kinds() {
    let err = server_with(|n| {
        n.actor_type::<Counter>("x", |t| counter(t).disable_relocation())
            .actor_type::<Counter>("x", |t| counter(t).disable_relocation())
    })
    .unwrap_err();
    assert!(
        matches!(err, StartupError::DuplicateStableType { .. }),
        "{err:?}"
    );
    let err = server_with(|n| {
        n.user_spot_type::<Room>("x", |t| room(t).disable_relocation())
            .instance_spot_type::<Room>("x", |t| room(t).disable_relocation())
    })
    .unwrap_err();
    assert!(
        matches!(err, StartupError::DuplicateStableType { .. }),
        "{err:?}"
    );
    // Case-sensitive: "X" is another type.
    assert!(
        server_with(|n| {
            n.actor_type::<Counter>("x", |t| counter(t).disable_relocation())
                .actor_type::<Counter>("X", |t| counter(t).disable_relocation())
        })
        .is_ok()
    );
}

#[test]
fn stable_type_length_bounds() {
    assert!(
        server_with(|n| n.actor_type::<Counter>("é".repeat(127) + "a", |t| {
            counter(t).disable_relocation()
        }))
        .is_ok(),
        "255 bytes"
    );
    for bad in [String::new(), "a".repeat(256)] {
        let err = server_with(|n| {
            n.actor_type::<Counter>(bad.clone(), |t| counter(t).disable_relocation())
        })
        .unwrap_err();
        assert!(
            matches!(err, StartupError::InvalidStableType { .. }),
            "{err:?}"
        );
    }
}

#[test]
fn object_type_without_a_factory_fails_startup() {
    let err = server_with(|n| n.actor_type::<Counter>("counter", |t| t.disable_relocation()))
        .unwrap_err();
    assert!(
        matches!(err, StartupError::MissingFactory { .. }),
        "{err:?}"
    );
}

#[test]
fn factory_choosing_no_relocation_policy_fails_startup() {
    let err = server_with(|n| n.actor_type::<Counter>("counter", counter)).unwrap_err();
    assert!(
        matches!(err, StartupError::RelocationPolicyNotChosen { .. }),
        "{err:?}"
    );
    let err = server_with(|n| n.user_spot_type::<Room>("room", room)).unwrap_err();
    assert!(
        matches!(err, StartupError::RelocationPolicyNotChosen { .. }),
        "{err:?}"
    );
}

#[test]
fn factory_choosing_two_relocation_policies_fails_startup() {
    let err = start(
        root()
            .relocation_store(relocation_store())
            .route_mesh(mesh("m"), |n| {
                n.object_role(ObjectRole::Server)
                    .actor_type::<Counter>("counter", |t| {
                        counter(t)
                            .disable_relocation()
                            .preserve_state_with(CounterState)
                    })
            }),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            StartupError::RelocationPolicyChosenTwice {
                first: RelocationChoice::Disable,
                second: RelocationChoice::Preserve,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn instance_spot_or_state_policy_without_a_relocation_store_fails_startup() {
    let cases: [Reg; 3] = [
        |n| n.instance_spot_type::<Room>("inst", |t| room(t).disable_relocation()),
        |n| n.actor_type::<Counter>("c", |t| counter(t).recreate_on_relocation()),
        |n| n.actor_type::<Counter>("c", |t| counter(t).preserve_state_with(CounterState)),
    ];
    for case in cases {
        let err = server_with(case).unwrap_err();
        assert!(
            matches!(err, StartupError::RelocationStoreRequired { .. }),
            "{err:?}"
        );
        assert_eq!(err.kind(), super::super::StartupErrorKind::MissingStore);
        // With exactly one Relocation Store the same registration starts.
        let ok = start(
            root()
                .relocation_store(relocation_store())
                .route_mesh(mesh("m"), |n| case(n.object_role(ObjectRole::Server))),
        );
        assert!(ok.is_ok(), "{ok:?}");
    }
    // DisableRelocation on Actors and User Spots needs no Relocation Store.
    assert!(
        server_with(|n| n.actor_type::<Counter>("c", |t| counter(t).disable_relocation())).is_ok()
    );
}

#[test]
fn spot_modes_where_they_do_not_apply_fail_startup() {
    let cases: [(Reg, &str); 3] = [
        (
            |n| {
                n.instance_spot_type::<Room>("i", |t| {
                    room(t)
                        .disable_relocation()
                        .execution(SpotExecution::SpotWide)
                })
            },
            "execution",
        ),
        (
            |n| {
                n.instance_spot_type::<Room>("i", |t| {
                    room(t)
                        .disable_relocation()
                        .readiness(ReadinessMode::ApplicationSignaled)
                })
            },
            "readiness",
        ),
        (
            |n| {
                n.user_spot_type::<Room>("u", |t| {
                    room(t)
                        .disable_relocation()
                        .execution(SpotExecution::PerActor)
                        .readiness(ReadinessMode::ApplicationSignaled)
                })
            },
            "readiness",
        ),
    ];
    for (case, setting) in cases {
        let err = start(
            root()
                .relocation_store(relocation_store())
                .route_mesh(mesh("m"), |n| case(n.object_role(ObjectRole::Server))),
        )
        .unwrap_err();
        assert!(
            matches!(err, StartupError::SpotModeNotApplicable { setting: s, .. } if s == setting),
            "{err:?}"
        );
    }
}
