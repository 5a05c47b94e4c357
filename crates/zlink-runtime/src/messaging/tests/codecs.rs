//! Codec rules through the root registry (spec 06 §12).

use std::any::Any;

use zlink_codec::payload::{
    BoxError, CustomCodec, DeclaredType, JSON_CONTENT_TYPE, MESSAGE_PACK_CONTENT_TYPE,
    PayloadCodec, Selector,
};

use super::*;

/// A custom codec for `Ping`/`Pong` that writes `tag:n`, so tests can tell codecs apart.
#[derive(Debug)]
struct Tagged(&'static str);

impl CustomCodec for Tagged {
    fn encode(&self, declared: DeclaredType, value: &dyn Any) -> Result<Vec<u8>, BoxError> {
        let n = if let Some(p) = value.downcast_ref::<Ping>() {
            p.n
        } else if let Some(p) = value.downcast_ref::<Pong>() {
            p.n
        } else {
            return Err(format!("cannot encode {}", declared.name()).into());
        };
        Ok(format!("{}:{n}", self.0).into_bytes())
    }

    fn decode(&self, declared: DeclaredType, bytes: &[u8]) -> Result<Box<dyn Any>, BoxError> {
        let text = std::str::from_utf8(bytes)?;
        let n: u32 = text
            .strip_prefix(self.0)
            .and_then(|t| t.strip_prefix(':'))
            .ok_or("wrong tag")?
            .parse()?;
        if declared == DeclaredType::of::<Ping>() {
            Ok(Box::new(Ping { n }))
        } else if declared == DeclaredType::of::<Pong>() {
            Ok(Box::new(Pong { n }))
        } else {
            Err("unsupported type".into())
        }
    }
}

fn tagged(content_type: &str, tag: &'static str) -> PayloadCodec {
    PayloadCodec::custom(content_type, Arc::new(Tagged(tag)))
}

fn echo(codecs: Registry) -> Dispatcher {
    Dispatcher::builder(codecs)
        .node_request::<Ping, _, _>(mesh(), |p, _| async move { Ok(Pong { n: p.n }) })
        .build()
        .unwrap()
}

fn with_payload(content_type: &str, payload: &[u8]) -> InboundFrame {
    let mut frame = request(node_target(), "Ping", &Ping { n: 0 });
    frame.content_type = Bytes::copy_from_slice(content_type.as_bytes());
    frame.payload = Bytes::copy_from_slice(payload);
    frame
}

#[tokio::test]
async fn last_registration_of_the_same_canonical_content_type_replaces_earlier_ones() {
    let codecs = Registry::builder()
        .register(tagged("application/x-tag", "first"), Selector::none())
        .register(tagged(" \tApplication/X-TAG ", "second"), Selector::none())
        .build()
        .unwrap();
    assert_eq!(
        codecs
            .content_types()
            .filter(|c| *c == "application/x-tag")
            .count(),
        1
    );
    let d = echo(codecs);
    let out = dispatch(&d, with_payload("application/x-tag", b"second:7")).await;
    assert_eq!(reply::<Ping>(&d, out), Pong { n: 7 });
    let err = error_reply(dispatch(&d, with_payload("application/x-tag", b"first:7")).await);
    assert_eq!(
        err.kind(),
        ErrorKind::ProtocolError,
        "the first codec is gone"
    );
}

#[tokio::test]
async fn content_type_not_exactly_registered_is_a_protocol_error_never_json() {
    let runs = Counter::default();
    let codecs = Registry::builder()
        .register(PayloadCodec::message_pack(), Selector::none())
        .build()
        .unwrap();
    let r = runs.clone();
    let d = Dispatcher::builder(codecs)
        .node_request::<Ping, _, _>(mesh(), move |p, _| {
            r.bump();
            async move { Ok(Pong { n: p.n }) }
        })
        .build()
        .unwrap();
    let json = br#"{"n":1}"#;
    for content_type in [
        "Application/JSON",
        "application/json; charset=utf-8",
        " application/json",
        "application/x-unknown",
        "application/MsgPack",
        "",
    ] {
        let err = error_reply(dispatch(&d, with_payload(content_type, json)).await);
        assert_eq!(err.kind(), ErrorKind::ProtocolError, "{content_type:?}");
    }
    let mut not_utf8 = with_payload("application/json", json);
    not_utf8.content_type = Bytes::from_static(b"application/\xffjson");
    assert_eq!(
        error_reply(dispatch(&d, not_utf8).await).kind(),
        ErrorKind::ProtocolError
    );
    assert_eq!(runs.get(), 0, "no handler ran");
    // The exact canonical forms are accepted.
    let ok = dispatch(&d, with_payload(JSON_CONTENT_TYPE, json)).await;
    assert_eq!(reply::<Ping>(&d, ok), Pong { n: 1 });
    assert_eq!(runs.get(), 1);
}

#[tokio::test]
async fn payload_that_does_not_decode_is_a_protocol_error() {
    let d = echo(Registry::json_only());
    let err = error_reply(dispatch(&d, with_payload(JSON_CONTENT_TYPE, b"{\"n\":\"x\"}")).await);
    assert_eq!(err.kind(), ErrorKind::ProtocolError);
}

#[test]
fn declared_type_without_an_extension_is_sent_as_json() {
    let codecs = Registry::builder()
        .register(PayloadCodec::message_pack(), Selector::exact::<Pong>())
        .build()
        .unwrap();
    let out = OutboundMessage::encode(&codecs, &Ping { n: 3 }, &Metadata::empty()).unwrap();
    assert_eq!(out.packet.as_str(), "Ping");
    assert_eq!(out.content_type, JSON_CONTENT_TYPE);
    assert_eq!(&out.payload[..], br#"{"n":3}"#);
    assert!(out.metadata.is_empty());
}

#[test]
fn later_registration_wins_when_several_match_the_declared_type() {
    let codecs = Registry::builder()
        .register(
            tagged("application/x-early", "early"),
            Selector::exact::<Ping>(),
        )
        .register(tagged("application/x-late", "late"), Selector::any())
        .build()
        .unwrap();
    let out = OutboundMessage::encode(&codecs, &Ping { n: 3 }, &Metadata::empty()).unwrap();
    assert_eq!(out.content_type, "application/x-late");
    assert_eq!(&out.payload[..], b"late:3");
}

#[tokio::test]
async fn message_pack_request_and_reply_round_trip_through_the_dispatcher() {
    let codecs = Registry::builder()
        .register(
            PayloadCodec::message_pack(),
            Selector::predicate(|d| {
                *d == DeclaredType::of::<Ping>() || *d == DeclaredType::of::<Pong>()
            }),
        )
        .build()
        .unwrap();
    let sent = OutboundMessage::encode(&codecs, &Ping { n: 9 }, &Metadata::empty()).unwrap();
    assert_eq!(sent.content_type, MESSAGE_PACK_CONTENT_TYPE);
    let d = echo(codecs);
    let out = dispatch(&d, with_payload(&sent.content_type, &sent.payload)).await;
    match &out {
        DispatchOutcome::Reply { content_type, .. } => {
            assert_eq!(content_type, MESSAGE_PACK_CONTENT_TYPE)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(reply::<Ping>(&d, out), Pong { n: 9 });
}

#[test]
fn reply_with_an_unregistered_content_type_is_a_protocol_error() {
    let codecs = Registry::json_only();
    let err = decode_reply::<Ping>(
        &codecs,
        InboundReply::Reply {
            content_type: b"application/JSON",
            payload: br#"{"n":1}"#,
        },
    )
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ProtocolError);
}

#[test]
fn outbound_message_carries_encoded_metadata() {
    let metadata = Metadata::builder().set("k", "v").build().unwrap();
    let out = OutboundMessage::encode(
        &Registry::json_only(),
        &Note { text: "t".into() },
        &metadata,
    )
    .unwrap();
    assert_eq!(Metadata::from_bytes(&out.metadata).unwrap(), metadata);
}
