//! Unit tests of the messaging error type: kinds, messages, and the runtime's typed failures.

use super::*;

#[test]
fn every_kind_round_trips_through_its_code() {
    let mut codes: Vec<u8> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
    for kind in ErrorKind::ALL {
        assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
    }
    codes.dedup();
    assert_eq!(codes, (1..=13).collect::<Vec<u8>>());
    assert_eq!(ErrorKind::from_code(0), None);
    assert_eq!(ErrorKind::from_code(14), None);
}

#[test]
fn message_at_the_bound_is_kept_and_one_past_is_cut() {
    let at = "a".repeat(ErrorMessage::MAX_LEN);
    assert_eq!(ErrorMessage::sanitise(&at).as_str(), at);
    let past = "a".repeat(ErrorMessage::MAX_LEN + 1);
    assert_eq!(
        ErrorMessage::sanitise(&past).as_str().len(),
        ErrorMessage::MAX_LEN
    );
}

#[test]
fn message_is_cut_at_a_character_boundary() {
    // 255 ASCII bytes then a 2-byte character: the character does not fit.
    let text = format!("{}é", "a".repeat(255));
    assert_eq!(ErrorMessage::sanitise(&text).as_str().len(), 255);
}

#[test]
fn control_characters_become_spaces() {
    assert_eq!(
        ErrorMessage::sanitise("a\r\nb\0c\u{1b}").as_str(),
        "a  b c "
    );
}

#[test]
fn handler_failure_reply_message_hides_the_cause() {
    let err = ZLinkError::handler_failed("Ping", "database password is hunter2");
    assert_eq!(err.kind(), ErrorKind::InternalFailure);
    assert!(!err.reply_message().as_str().contains("hunter2"));
}

/// A check on an error's source.
type SourceCheck = fn(&ZLinkError) -> bool;

/// Whether `e`'s source is a `T` (held directly or shared in an `Arc`).
fn source_is<T: std::error::Error + 'static>(e: &ZLinkError) -> bool {
    let source = std::error::Error::source(e);
    source.is_some_and(|s| s.is::<T>() || s.is::<Arc<T>>())
}

/// Checks `err`'s kind, and that its reply message holds no text of its source chain.
fn check(err: &ZLinkError, kind: ErrorKind) {
    assert_eq!(err.kind(), kind, "{err}");
    let reply = err.reply_message();
    let mut next = std::error::Error::source(err);
    while let Some(cause) = next {
        assert!(
            !reply.as_str().contains(&cause.to_string()),
            "{err}: {cause}"
        );
        next = cause.source();
    }
    assert!(!reply.as_str().contains("secret"), "{reply}");
}

#[test]
fn runtime_failures_keep_their_kind_and_typed_source() {
    use zlink_location::LocationError as L;
    use zlink_transport::TransportError as T;
    let json = serde_json::from_slice::<u8>(b"{").expect_err("not a number");
    let cancelled = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(async {
            let task = tokio::spawn(std::future::pending::<()>());
            task.abort();
            task.await
        })
        .expect_err("cancelled");
    let typed: [(ZLinkError, ErrorKind, SourceCheck); 10] = [
        (
            ZLinkError::location_store(L::CapacityExceeded),
            ErrorKind::CapacityExceeded,
            source_is::<L>,
        ),
        (
            ZLinkError::location_store(L::Contended),
            ErrorKind::InternalFailure,
            source_is::<L>,
        ),
        // Spec 23: a Relocation Store timeout is `DeadlineExceeded`; any other failed
        // operation is activation infrastructure (06 §20): `InternalFailure`.
        (
            ZLinkError::RelocationStore(RelocationStoreError::operation(
                zlink_store_spi::StoreError::TimedOut,
            )),
            ErrorKind::DeadlineExceeded,
            source_is::<zlink_store_spi::StoreError>,
        ),
        (
            ZLinkError::RelocationStore(RelocationStoreError::operation(
                zlink_store_spi::StoreError::Cancelled,
            )),
            ErrorKind::InternalFailure,
            source_is::<zlink_store_spi::StoreError>,
        ),
        (
            ZLinkError::transport(T::Exhausted("ids")),
            ErrorKind::InternalFailure,
            source_is::<T>,
        ),
        (
            ZLinkError::transport(T::InvalidArgument("secret".into())),
            ErrorKind::InvalidOperation,
            source_is::<T>,
        ),
        (
            ZLinkError::ManualPeerExists {
                endpoint: "h:1".into(),
                source: Arc::new(T::InvalidArgument("secret".into())).into(),
            },
            ErrorKind::AlreadyExists,
            source_is::<T>,
        ),
        (
            ZLinkError::malformed_payload("end command")(json.into()),
            ErrorKind::ProtocolError,
            source_is::<PayloadError>,
        ),
        (
            ZLinkError::Internal(InternalError::Task {
                what: "relocation",
                source: Arc::new(cancelled).into(),
            }),
            ErrorKind::InternalFailure,
            source_is::<tokio::task::JoinError>,
        ),
        (
            ZLinkError::Creation(CreationError::RequestTooLarge {
                source: Arc::new(L::Contended).into(),
            }),
            ErrorKind::InvalidOperation,
            source_is::<L>,
        ),
    ];
    for (err, kind, typed) in typed {
        check(&err, kind);
        assert!(typed(&err), "{err}: the source is the typed error");
    }
    let adapter = ZLinkError::AdapterFailed {
        step: "capture",
        source: SharedError::from(BoxError::from("secret state")),
    };
    check(&adapter, ErrorKind::InternalFailure);
    let mismatch = ZLinkError::TypeMismatch {
        target: crate::messaging::Target::object(
            zlink_codec::keys::AuthorityKind::Actor,
            &zlink_codec::ObjectId::new("a").expect("id"),
        ),
        kind: ObjectKind::Actor,
        stable_type: StableType::new("t").expect("type"),
    };
    check(&mismatch, ErrorKind::TypeMismatch);
    let moving = ZLinkError::Unavailable {
        target: crate::messaging::Target::object(
            zlink_codec::keys::AuthorityKind::Spot,
            &zlink_codec::ObjectId::new("s").expect("id"),
        ),
        reason: UnavailableReason::Moving,
    };
    check(&moving, ErrorKind::Unavailable);
    for (err, kind) in [
        (ZLinkError::NoReply, ErrorKind::InternalFailure),
        (
            ZLinkError::from(StaleReason::ChangedDuringMove),
            ErrorKind::Unavailable,
        ),
        (ZLinkError::MailboxFull, ErrorKind::CapacityExceeded),
        (ZLinkError::ActivationClosing, ErrorKind::Unavailable),
        (
            ZLinkError::DeadlinePassed {
                operation: "creation",
            },
            ErrorKind::DeadlineExceeded,
        ),
        (
            ZLinkError::NotConfigured(Unconfigured::LocationStore),
            ErrorKind::NotConfigured,
        ),
        (
            ZLinkError::from(InvalidCall::ZeroDeadline),
            ErrorKind::InvalidOperation,
        ),
    ] {
        check(&err, kind);
    }
}

#[test]
fn a_typed_call_refusal_or_stale_fence_keeps_its_kind_and_names_its_reason() {
    use crate::messaging::IdRole;
    use zlink_codec::keys::AuthorityKind;
    use zlink_codec::{CodecError, ObjectId};
    use zlink_relocation::unit::{AggregateRejection, RecordedStage};
    let id = |s: &str| ObjectId::new(s).expect("id");
    let bad_id = || Arc::new(ObjectId::new("").expect_err("empty")).into();
    let json = || Arc::new(serde_json::from_slice::<u8>(b"{").expect_err("not a number")).into();
    let st = || StableType::new("room").expect("type");
    let (actor, spot) = (AuthorityKind::Actor, AuthorityKind::Spot);
    let invalid_id = |what| InvalidCall::InvalidId {
        what,
        source: bad_id(),
    };
    // Each call refusal: `InvalidOperation`, its message naming the reason.
    let calls: Vec<(InvalidCall, &str)> = vec![
        (
            invalid_id(IdRole::ActorId),
            "invalid actor id: it must be 1..=255",
        ),
        (invalid_id(IdRole::SpotId), "invalid spot id"),
        (invalid_id(IdRole::StableType), "invalid stable type"),
        (
            invalid_id(IdRole::MembershipSpotId),
            "invalid spot id of a membership record",
        ),
        (
            InvalidCall::InvalidId {
                what: IdRole::OperationId,
                source: Arc::new(zlink_codec::OperationId::new(0).expect_err("zero")).into(),
            },
            "invalid operation id: it must be a non-zero",
        ),
        (
            InvalidCall::OptionSetTwice { option: "deadline" },
            "the deadline option was set twice",
        ),
        (InvalidCall::ZeroDeadline, "the deadline must be positive"),
        (
            InvalidCall::DeadlineTooFar {
                deadline: std::time::Duration::MAX,
            },
            "is too far away",
        ),
        (
            InvalidCall::ReservedSpotId {
                id: id("a-entry-x"),
            },
            "\"a-entry-x\" has the reserved Entry Spot form",
        ),
        (
            InvalidCall::NotSpotIncarnation {
                spot: id("s"),
                named: 3,
            },
            "spot \"s\" is not the User Spot incarnation 3",
        ),
        (
            InvalidCall::Unencodable {
                what: "join command",
                source: json(),
            },
            "the join command could not be encoded",
        ),
    ];
    let moves: Vec<(MoveRefusal, &str)> = vec![
        (MoveRefusal::NotSpotWide, "only a SpotWide User Spot"),
        (MoveRefusal::NotPerActor, "only a PerActor User Spot"),
        (MoveRefusal::NotInstanceSpot, "is not an Instance Spot"),
        (
            MoveRefusal::SpotWideRejected {
                spot: id("s"),
                source: AggregateRejection::RelocationDisabled { index: 1 },
            },
            "the SpotWide Spot \"s\" does not move (RelocationDisabled)",
        ),
        (
            MoveRefusal::RelocationDisabled {
                kind: actor,
                id: id("a"),
            },
            "actor \"a\" has DisableRelocation",
        ),
        (
            MoveRefusal::MemberRelocationDisabled { member: id("m") },
            "the member \"m\" of the PerActor Spot has DisableRelocation",
        ),
        (
            MoveRefusal::AlreadyMoving {
                kind: spot,
                id: id("s"),
            },
            "a move of spot \"s\" is already running",
        ),
        (
            MoveRefusal::NotOwnedHere {
                kind: actor,
                id: id("a"),
            },
            "actor \"a\" is not owned by this node",
        ),
        (MoveRefusal::MovesWithSpot, "moves with its Spot"),
        (MoveRefusal::NotPerActorMember, "no member of the PerActor"),
        (MoveRefusal::TargetLacksTypes, "does not offer every type"),
        (
            MoveRefusal::NoStateAdapter {
                kind: actor,
                id: id("a"),
            },
            "actor \"a\" preserves its state (PreserveStateWith) without an adapter",
        ),
        (
            MoveRefusal::TooManyMembers { count: 5 },
            "has 5 members, too many",
        ),
    ];
    let calls = calls.into_iter().chain(
        moves
            .into_iter()
            .map(|(m, text)| (InvalidCall::Move(m), text)),
    );
    for (call, text) in calls {
        let err = ZLinkError::from(call);
        check(&err, ErrorKind::InvalidOperation);
        assert!(err.reply_message().as_str().contains(text), "{err}");
        if let ZLinkError::InvalidCall(
            InvalidCall::InvalidId { .. }
            | InvalidCall::Unencodable { .. }
            | InvalidCall::Move(MoveRefusal::SpotWideRejected { .. }),
        ) = &err
        {
            assert!(
                source_is::<CodecError>(&err)
                    || source_is::<serde_json::Error>(&err)
                    || source_is::<AggregateRejection>(&err),
                "{err}: the source is the typed cause"
            );
        }
    }
    // Each stale fence: `Unavailable`, its message naming the reason.
    let stale = [
        (
            StaleReason::ReservationChanged,
            "differ from the reservation",
        ),
        (
            StaleReason::ReservationElsewhere,
            "does not name this node's run",
        ),
        (
            StaleReason::ChangedBeforeCommit,
            "changed before the commit",
        ),
        (StaleReason::ChangedBeforeAbort, "changed before the abort"),
        (StaleReason::NoCreationResult, "no result is stored"),
        (StaleReason::EndFenceChanged, "differ from the request"),
        (
            StaleReason::NotActiveHere,
            "not an Active record of this node",
        ),
        (
            StaleReason::JoinPartyMoving,
            "the Actor or the Spot is moving",
        ),
        (
            StaleReason::JoinPartyNotLive,
            "the Actor or the Spot is not live",
        ),
        (StaleReason::ChangedBeforeJoin, "the Actor's record changed"),
        (
            StaleReason::ActivationElsewhere,
            "names another node or lifecycle",
        ),
        (
            StaleReason::TypeNotServed { stable_type: st() },
            "serves no Instance Spot type \"room\"",
        ),
        (
            StaleReason::TypeNotOffered { stable_type: st() },
            "does not offer the type \"room\"",
        ),
        (
            StaleReason::NotLiveHere {
                kind: spot,
                id: id("s"),
            },
            "spot \"s\" is not live on this node",
        ),
        (StaleReason::TargetNotSecured, "the target lease is gone"),
        (StaleReason::ChangedDuringMove, "changed during the move"),
        (
            StaleReason::StageConflict {
                stage: RecordedStage::Captured,
            },
            "(Captured not recorded)",
        ),
        (
            StaleReason::MoveNotCommitted,
            "did not commit on the target",
        ),
    ];
    for (reason, text) in stale {
        let err = ZLinkError::from(reason);
        check(&err, ErrorKind::Unavailable);
        let reply = err.reply_message();
        assert!(
            reply.as_str().starts_with("stale authority fence: "),
            "{reply}"
        );
        assert!(reply.as_str().contains(text), "{reply}");
    }
}

#[test]
fn application_error_keeps_its_chosen_kind() {
    let err = ZLinkError::application(ErrorKind::CapacityExceeded, "full");
    assert_eq!(err.kind(), ErrorKind::CapacityExceeded);
    assert_eq!(err.reply_message().as_str(), "full");
}

#[test]
fn a_location_failure_has_one_common_kind_in_and_out_of_a_zlink_error() {
    let full = zlink_location::LocationError::CapacityExceeded;
    assert_eq!(ErrorKind::from(&full), ErrorKind::CapacityExceeded);
    assert_eq!(
        ZLinkError::location_store(full).kind(),
        ErrorKind::CapacityExceeded
    );
}

/// An application error type with a typed cause of its own.
#[derive(Debug, thiserror::Error)]
#[error("the ledger is closed")]
struct LedgerClosed {
    #[source]
    source: std::io::Error,
}

#[test]
fn a_handler_or_adapter_failure_gives_the_application_error_itself_as_its_source() {
    let app = || LedgerClosed {
        source: std::io::Error::other("the disk is gone"),
    };
    let failures = [
        ZLinkError::handler_failed("Ping", app()),
        ZLinkError::AdapterFailed {
            step: "capture",
            source: SharedError::new(app()),
        },
    ];
    for err in failures {
        let source = std::error::Error::source(&err).expect("a source");
        let ledger = source
            .downcast_ref::<LedgerClosed>()
            .unwrap_or_else(|| panic!("{err}: the source is the application error: {source:?}"));
        let io = std::error::Error::source(ledger)
            .and_then(|s| s.downcast_ref::<std::io::Error>())
            .expect("one more source is its io::Error");
        assert_eq!(io.to_string(), "the disk is gone");
        // A clone shares the same cause.
        let clone = err.clone();
        assert!(std::error::Error::source(&clone).is_some_and(|s| s.is::<LedgerClosed>()));
    }
}

#[test]
fn a_runtime_failure_gives_its_typed_error_itself_as_its_source() {
    use zlink_location::LocationError as L;
    use zlink_transport::TransportError as T;
    /// `err`'s source downcasts to `E` itself (not to a shared `Arc` around it).
    fn typed<E: std::error::Error + 'static>(err: &ZLinkError) {
        let source = std::error::Error::source(err).expect("a source");
        assert!(source.is::<E>(), "{err}: {source:?}");
    }
    typed::<L>(&ZLinkError::location_store(L::Contended));
    typed::<L>(&ZLinkError::LocationQueryFailed {
        source: Arc::new(L::Contended).into(),
    });
    typed::<T>(&ZLinkError::transport(T::Exhausted("ids")));
    typed::<T>(&ZLinkError::ManualPeerExists {
        endpoint: "h:1".into(),
        source: Arc::new(T::InvalidArgument("taken".into())).into(),
    });
    // The relocation's causes, and the internal steps' (`error_parts`), the same way.
    typed::<L>(&ZLinkError::MovedUnconfirmed {
        target: crate::messaging::Target::object(
            zlink_codec::keys::AuthorityKind::Actor,
            &zlink_codec::ObjectId::new("a").expect("id"),
        ),
        to: zlink_codec::RoutingId::new(vec![1u8]).expect("rid"),
        source: Arc::new(L::Contended).into(),
    });
    typed::<L>(&ZLinkError::RelocationRefused {
        kind: ErrorKind::Unavailable,
        what: "a test refusal",
        source: Some(crate::messaging::SharedError::new(L::Contended)),
    });
}
