//! Payload codec registry behaviour (spec 06 §12 and its §25 "Codec" verification items).

#![allow(clippy::unwrap_used)]

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use zlink_codec::CodecErrorKind;
use zlink_codec::payload::{
    BoxError, CustomCodec, DeclaredType, PayloadCodec, Registry, SELECTION_CACHE_LIMIT, Selector,
    canonical_content_type,
};

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Score {
    points: u32,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Circle {
    r: u32,
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
enum Shape {
    Circle(Circle),
}

/// A custom codec that writes a fixed tag before the JSON of a `Score`.
#[derive(Debug)]
struct Tagged(&'static str);

impl CustomCodec for Tagged {
    fn encode(&self, _declared: DeclaredType, value: &dyn Any) -> Result<Vec<u8>, BoxError> {
        let score = value.downcast_ref::<Score>().ok_or("not a Score")?;
        let mut out = self.0.as_bytes().to_vec();
        out.extend(serde_json::to_vec(score)?);
        Ok(out)
    }

    fn decode(&self, _declared: DeclaredType, bytes: &[u8]) -> Result<Box<dyn Any>, BoxError> {
        let rest = bytes.strip_prefix(self.0.as_bytes()).ok_or("missing tag")?;
        Ok(Box::new(serde_json::from_slice::<Score>(rest)?))
    }
}

fn tagged(content_type: &str, tag: &'static str) -> PayloadCodec {
    PayloadCodec::custom(content_type, Arc::new(Tagged(tag)))
}

#[test]
fn content_type_canonical_form_trims_sp_tab_and_lowercases() {
    assert_eq!(
        canonical_content_type("\t Application/Vnd.Example+JSON \t").unwrap(),
        "application/vnd.example+json"
    );
    assert_eq!(canonical_content_type("a/b").unwrap(), "a/b");
}

#[test]
fn content_type_with_parameters_whitespace_non_ascii_or_empty_token_is_a_configuration_error() {
    for bad in [
        "application/json; charset=utf-8",
        "application/json;",
        "application /json",
        "application/ json",
        "appli cation/json",
        "application/jsön",
        "/json",
        "application/",
        "application",
        "",
        " \t ",
        "application/json/extra",
        "application/(json)",
        "application/json\n",
    ] {
        let e = canonical_content_type(bad).unwrap_err();
        assert_eq!(e.kind(), CodecErrorKind::Configuration, "{bad:?}");
        let built = Registry::builder()
            .register(tagged(bad, "T"), Selector::exact::<Score>())
            .build();
        assert!(built.is_err(), "{bad:?} accepted at build");
    }
}

#[test]
fn last_registration_of_one_canonical_form_replaces_earlier_ones() {
    let registry = Registry::builder()
        .register(
            tagged("application/x-score", "A"),
            Selector::exact::<Score>(),
        )
        .register(
            tagged(" Application/X-Score", "B"),
            Selector::exact::<Score>(),
        )
        .build()
        .unwrap();
    let sent = registry.encode(&Score { points: 1 }).unwrap();
    assert_eq!(sent.content_type, "application/x-score");
    assert_eq!(sent.bytes, br#"B{"points":1}"#);
    // The receive side holds only the replacement.
    assert!(
        registry
            .decode::<Score>("application/x-score", br#"A{"points":1}"#)
            .is_err()
    );
    assert_eq!(
        registry
            .decode::<Score>("application/x-score", br#"B{"points":1}"#)
            .unwrap(),
        Score { points: 1 }
    );
    assert_eq!(
        registry
            .content_types()
            .filter(|c| *c == "application/x-score")
            .count(),
        1
    );
}

#[test]
fn declared_type_without_registration_uses_json_on_send() {
    let registry = Registry::builder()
        .register(PayloadCodec::message_pack(), Selector::exact::<Score>())
        .build()
        .unwrap();
    let sent = registry.encode(&Circle { r: 2 }).unwrap();
    assert_eq!(sent.content_type, "application/json");
    assert_eq!(sent.bytes, br#"{"r":2}"#);
    assert_eq!(
        Registry::default()
            .encode(&Score { points: 4 })
            .unwrap()
            .bytes,
        br#"{"points":4}"#
    );
}

#[test]
fn later_registration_wins_when_several_match_the_declared_type() {
    let registry = Registry::builder()
        .register(tagged("application/x-first", "1"), Selector::any())
        .register(
            tagged("application/x-second", "2"),
            Selector::exact::<Score>(),
        )
        .build()
        .unwrap();
    assert_eq!(registry.select::<Score>(), "application/x-second");
    assert_eq!(
        registry.encode(&Score { points: 0 }).unwrap().bytes,
        br#"2{"points":0}"#
    );
    // Only the earlier (catch-all) registration matches another type.
    assert_eq!(registry.select::<Circle>(), "application/x-first");
}

#[test]
fn selection_uses_the_declared_type_not_the_value_inside() {
    let registry = Registry::builder()
        .register(PayloadCodec::message_pack(), Selector::exact::<Circle>())
        .build()
        .unwrap();
    // A Shape holding a Circle is declared as Shape: JSON.
    let sent = registry.encode(&Shape::Circle(Circle { r: 1 })).unwrap();
    assert_eq!(sent.content_type, "application/json");
    // The Circle itself, declared as Circle: MessagePack.
    assert_eq!(
        registry.encode(&Circle { r: 1 }).unwrap().content_type,
        "application/msgpack"
    );
}

#[test]
fn receive_compares_the_wire_content_type_verbatim() {
    let registry = Registry::builder()
        .register(PayloadCodec::message_pack(), Selector::exact::<Score>())
        .build()
        .unwrap();
    let bytes = registry.encode(&Score { points: 9 }).unwrap().bytes;
    assert_eq!(
        registry
            .decode::<Score>("application/msgpack", &bytes)
            .unwrap(),
        Score { points: 9 }
    );
    for wire in [
        "Application/MsgPack",
        " application/msgpack",
        "application/msgpack ",
        "application/msgpack; v=1",
        "application/x-unknown",
        "",
    ] {
        let e = registry.decode::<Score>(wire, &bytes).unwrap_err();
        assert_eq!(e.kind(), CodecErrorKind::Protocol, "{wire:?}");
    }
}

#[test]
fn unknown_wire_content_type_is_never_reinterpreted_as_json() {
    let registry = Registry::default();
    let json = br#"{"points":1}"#;
    assert!(registry.decode::<Score>("application/json", json).is_ok());
    let e = registry.decode::<Score>("text/json", json).unwrap_err();
    assert_eq!(e.kind(), CodecErrorKind::Protocol);
}

#[test]
fn message_pack_round_trips_with_field_names() {
    let registry = Registry::builder()
        .register(PayloadCodec::message_pack(), Selector::exact::<Score>())
        .build()
        .unwrap();
    let sent = registry.encode(&Score { points: 3 }).unwrap();
    // fixmap(1) "points" 3
    assert_eq!(sent.bytes, b"\x81\xa6points\x03");
}

#[test]
fn codec_failure_is_a_payload_error() {
    let registry = Registry::builder()
        .register(
            tagged("application/x-score", "T"),
            Selector::exact::<Circle>(),
        )
        .build()
        .unwrap();
    // The custom codec only handles Score: encoding a Circle fails inside the codec.
    let e = registry.encode(&Circle { r: 1 }).unwrap_err();
    assert_eq!(e.kind(), CodecErrorKind::Payload);
    let e = registry
        .decode::<Score>("application/json", b"{")
        .unwrap_err();
    assert_eq!(e.kind(), CodecErrorKind::Payload);
}

macro_rules! l0 {
    ($f:ident, $t:ty) => {
        $f::<$t>();
    };
}
macro_rules! l1 {
    ($f:ident, $t:ty) => {
        l0!($f, ($t, u8));
        l0!($f, ($t, i8));
    };
}
macro_rules! l2 {
    ($f:ident, $t:ty) => {
        l1!($f, ($t, u8));
        l1!($f, ($t, i8));
    };
}
macro_rules! l3 {
    ($f:ident, $t:ty) => {
        l2!($f, ($t, u8));
        l2!($f, ($t, i8));
    };
}
macro_rules! l4 {
    ($f:ident, $t:ty) => {
        l3!($f, ($t, u8));
        l3!($f, ($t, i8));
    };
}
macro_rules! l5 {
    ($f:ident, $t:ty) => {
        l4!($f, ($t, u8));
        l4!($f, ($t, i8));
    };
}
macro_rules! l6 {
    ($f:ident, $t:ty) => {
        l5!($f, ($t, u8));
        l5!($f, ($t, i8));
    };
}
macro_rules! l7 {
    ($f:ident, $t:ty) => {
        l6!($f, ($t, u8));
        l6!($f, ($t, i8));
    };
}
macro_rules! l8 {
    ($f:ident, $t:ty) => {
        l7!($f, ($t, u8));
        l7!($f, ($t, i8));
    };
}
macro_rules! l9 {
    ($f:ident, $t:ty) => {
        l8!($f, ($t, u8));
        l8!($f, ($t, i8));
    };
}
macro_rules! l10 {
    ($f:ident, $t:ty) => {
        l9!($f, ($t, u8));
        l9!($f, ($t, i8));
    };
}

#[test]
fn selection_cache_holds_1024_declared_types_and_re_evaluates_later_ones_every_send() {
    static EVALUATIONS: AtomicUsize = AtomicUsize::new(0);
    let registry = Registry::builder()
        .register(
            PayloadCodec::message_pack(),
            Selector::predicate(|d| {
                EVALUATIONS.fetch_add(1, Ordering::SeqCst);
                d.type_id() == std::any::TypeId::of::<Score>()
            }),
        )
        .build()
        .unwrap();
    // 1,024 distinct declared types fill the cache.
    std::thread_local!(static REG: std::cell::RefCell<Option<Registry>> = const { std::cell::RefCell::new(None) });
    REG.with(|r| *r.borrow_mut() = Some(registry.clone()));
    fn touch<T: 'static>() {
        REG.with(|r| {
            let r = r.borrow();
            assert_eq!(r.as_ref().unwrap().select::<T>(), "application/json");
        });
    }
    l10!(touch, ());
    assert_eq!(registry.cached_selections(), SELECTION_CACHE_LIMIT);

    // A cached type is not re-evaluated.
    let before = EVALUATIONS.load(Ordering::SeqCst);
    touch::<(((((((((((), u8), u8), u8), u8), u8), u8), u8), u8), u8), u8)>();
    assert_eq!(EVALUATIONS.load(Ordering::SeqCst), before);

    // The 1,025th type is selected correctly, never stored, and re-evaluated on every send.
    for round in 1..=3 {
        assert_eq!(
            registry
                .encode(&Score { points: round })
                .unwrap()
                .content_type,
            "application/msgpack"
        );
        assert_eq!(EVALUATIONS.load(Ordering::SeqCst), before + round as usize);
        assert_eq!(registry.cached_selections(), SELECTION_CACHE_LIMIT);
    }
}

#[test]
fn registry_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<Registry>();
    let registry = Registry::default();
    let r2 = registry.clone();
    std::thread::spawn(move || r2.encode(&Score { points: 1 }).map(|e| e.bytes))
        .join()
        .unwrap()
        .unwrap();
    // The clone shares the selection cache.
    assert_eq!(registry.cached_selections(), 1);
}
