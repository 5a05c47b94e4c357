//! Lanes, credit, the reply completion path, frame limits and payload integrity.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::support::*;
use crate::handshake::HandshakeIo;
use crate::wire::{self, Hello, PROTOCOL_VERSION, Window, kind};
use crate::{
    DownReason, Envelope, Lane, MAX_FRAME_LEN, PeerHandle, QueueLimits, Reply, ReplyStatus,
    Transport, TransportError, TransportErrorKind,
};

const FRAME_PAYLOAD: usize = 100;

/// A pair where B grants A an application window of one frame and never takes frames out:
/// after one frame in flight, A's application lane only fills.
async fn starved_pair(
    queue: QueueLimits,
) -> (
    (Transport, crate::Inbound),
    (Transport, crate::Inbound),
    PeerHandle,
) {
    let ((a, ai), (b, bi)) = connected_pair(
        config(1, 1).app_queue(queue),
        config(2, 1).app_window(Window {
            count: 1,
            bytes: 1 << 20,
        }),
    )
    .await;
    let peer = a.peer(&rid(2)).unwrap();
    peer.try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD])))
        .unwrap();
    // Wait until that frame has been written (its reservation released).
    tokio::time::timeout(WAIT, async {
        while peer.queue_usage(Lane::App) != (0, 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    ((a, ai), (b, bi), peer)
}

fn frame_len(a: &Transport) -> usize {
    one_way(a, Bytes::from(vec![0u8; FRAME_PAYLOAD])).encoded_len()
}

#[tokio::test]
async fn app_queue_admits_its_count_bound_and_refuses_one_past() {
    let ((a, _ai), (_b, _bi), peer) = starved_pair(QueueLimits::new(4, 1 << 20).unwrap()).await;
    let len = frame_len(&a);
    for _ in 0..4 {
        peer.try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD])))
            .unwrap();
    }
    assert_eq!(peer.queue_usage(Lane::App), (4, 4 * len));
    let err = peer
        .try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD])))
        .unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Full);
    assert!(matches!(
        err,
        TransportError::Full {
            lane: Lane::App,
            count: 4,
            ..
        }
    ));
    assert_eq!(peer.queue_usage(Lane::App), (4, 4 * len));
}

#[tokio::test]
async fn app_queue_admits_its_byte_bound_and_refuses_one_byte_past() {
    let probe = node(9, 1).await.0;
    let len = frame_len(&probe);
    let ((a, _ai), (_b, _bi), peer) = starved_pair(QueueLimits::new(100, 3 * len).unwrap()).await;
    for _ in 0..2 {
        peer.try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD])))
            .unwrap();
    }
    // One byte more than the remaining room is refused, and nothing changes.
    let err = peer
        .try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD + 1])))
        .unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::Full);
    assert_eq!(peer.queue_usage(Lane::App), (2, 2 * len));
    // Exactly the remaining room is admitted.
    peer.try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD])))
        .unwrap();
    assert_eq!(peer.queue_usage(Lane::App), (3, 3 * len));
}

#[tokio::test]
async fn a_reply_goes_out_while_the_app_queue_is_full() {
    let ((a, mut ai), (b, mut bi), peer) =
        starved_pair(QueueLimits::new(2, 1 << 20).unwrap()).await;
    // B asks A something (B's own lanes are free).
    let req = request(&b, Bytes::from_static(b"question"));
    b.peer(&rid(1)).unwrap().try_send_app(&req).unwrap();
    let got = tokio::time::timeout(WAIT, ai.app.recv())
        .await
        .unwrap()
        .unwrap();
    // A's application lane toward B is full, and an async send is parked behind it.
    while peer
        .try_send_app(&one_way(&a, Bytes::from(vec![0u8; FRAME_PAYLOAD])))
        .is_ok()
    {}
    let parked = {
        let peer = peer.clone();
        let e = one_way(&a, Bytes::from_static(b"parked"));
        tokio::spawn(async move { peer.send_app(&e).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!parked.is_finished());
    // The reply still reaches B.
    let reply = Reply::to(
        got.envelope(),
        ReplyStatus::Ok,
        Bytes::from_static(b"answer"),
    )
    .unwrap();
    peer.send_reply(&reply).unwrap();
    let r = tokio::time::timeout(WAIT, bi.replies.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.reply().operation_id(), req.operation_id());
    assert_eq!(Some(r.reply().reply_route()), req.reply_route());
    assert_eq!(r.reply().payload().as_ref(), b"answer");
    // So does a control frame (its own lane and window).
    peer.try_send_control(&one_way(&a, Bytes::from_static(b"ctl")))
        .unwrap();
    let c = tokio::time::timeout(WAIT, bi.control.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.envelope().payload().as_ref(), b"ctl");
    // Once B takes application frames out, credit returns and the parked send completes.
    let mut payloads = Vec::new();
    for _ in 0..4 {
        let f = tokio::time::timeout(WAIT, bi.app.recv())
            .await
            .unwrap()
            .unwrap();
        payloads.push(f.into_envelope().into_payload());
    }
    tokio::time::timeout(WAIT, parked)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        payloads[3].as_ref(),
        b"parked",
        "frames arrive in send order"
    );
}

#[tokio::test]
async fn a_frame_of_max_frame_len_passes_and_one_byte_more_is_refused() {
    let ((a, _ai), (_b, mut bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    let peer = a.peer(&rid(2)).unwrap();
    let overhead = one_way(&a, Bytes::new()).encoded_len();
    let at_limit = one_way(&a, Bytes::from(vec![0x5a; MAX_FRAME_LEN - overhead]));
    assert_eq!(at_limit.encoded_len(), MAX_FRAME_LEN);
    peer.send_app(&at_limit).await.unwrap();
    let got = tokio::time::timeout(WAIT, bi.app.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.envelope().payload().len(), MAX_FRAME_LEN - overhead);

    let past = one_way(&a, Bytes::from(vec![0x5a; MAX_FRAME_LEN - overhead + 1]));
    let err = peer.send_app(&past).await.unwrap_err();
    assert_eq!(err.kind(), TransportErrorKind::InvalidArgument);
    assert!(
        matches!(err, TransportError::FrameTooLarge { len, max } if len == MAX_FRAME_LEN + 1 && max == MAX_FRAME_LEN)
    );
    let reply = Reply::new(
        ReplyStatus::Ok,
        a.ids().next_operation_id().unwrap(),
        a.ids().next_reply_route_id().unwrap(),
        Bytes::from(vec![0; MAX_FRAME_LEN]),
    );
    assert!(matches!(
        peer.send_reply(&reply),
        Err(TransportError::FrameTooLarge { .. })
    ));
}

#[tokio::test]
async fn a_received_frame_past_max_frame_len_is_a_protocol_error() {
    let (b, mut bi) = node(2, 1).await;
    // A raw peer with RID 1 (the deciding side) completes the handshake by hand.
    let stream = TcpStream::connect(b.local_addr()).await.unwrap();
    let mut io = HandshakeIo::new(crate::network::Connected::Tcp(stream)).unwrap();
    let hello = Hello {
        version: PROTOCOL_VERSION,
        mesh: zlink_codec::MeshName::new("test-mesh").unwrap(),
        rid: rid(1),
        generation: generation(1),
        app_window: Window {
            count: 8,
            bytes: 1 << 20,
        },
        control_window: Window {
            count: 8,
            bytes: 1 << 20,
        },
        channels: Default::default(),
    };
    io.write(hello.encode()).await.unwrap();
    Hello::decode(io.read().await.unwrap()).unwrap();
    io.write(wire::bare(kind::COMMIT)).await.unwrap();
    expect_up(&mut bi).await;
    let mut raw = io.into_stream();
    let mut prefix = BytesMut::new();
    prefix.put_u32((MAX_FRAME_LEN + 1) as u32);
    raw.write_all(&prefix).await.unwrap();
    let (_, reason) = expect_down(&mut bi).await;
    assert_eq!(reason, DownReason::Protocol);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_round_trip_with_equal_length_and_crc_on_every_plane() {
    let ((a, mut ai), (b, mut bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    let to_b = a.peer(&rid(2)).unwrap();
    let to_a = b.peer(&rid(1)).unwrap();
    for size in [1usize, 4 * 1024, 256 * 1024, 1024 * 1024] {
        let payload: Bytes = (0..size)
            .map(|i| (i * 31 + size) as u8)
            .collect::<Vec<u8>>()
            .into();
        let crc = crc32c::crc32c(&payload);

        let req = request(&a, payload.clone())
            .with_packet_name("echo")
            .unwrap()
            .with_content_type("application/octet-stream")
            .unwrap()
            .with_metadata(&b"k=v"[..])
            .unwrap();
        to_b.send_app(&req).await.unwrap();
        let got = tokio::time::timeout(WAIT, bi.app.recv())
            .await
            .unwrap()
            .unwrap();
        let env = got.envelope();
        assert_eq!(env.payload().len(), size);
        assert_eq!(crc32c::crc32c(env.payload()), crc);
        assert_eq!(env.packet_name(), "echo");
        assert_eq!(&env.metadata()[..], b"k=v");
        assert_eq!(env.source_rid(), &rid(1));
        assert_eq!(env.operation_id(), req.operation_id());

        let reply = Reply::to(env, ReplyStatus::Ok, env.payload().clone()).unwrap();
        to_a.send_reply(&reply).unwrap();
        let r = tokio::time::timeout(WAIT, ai.replies.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(r.reply().payload().len(), size);
        assert_eq!(crc32c::crc32c(r.reply().payload()), crc);

        to_a.send_control(&one_way(&b, payload.clone()))
            .await
            .unwrap();
        let c = tokio::time::timeout(WAIT, ai.control.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(c.envelope().payload().len(), size);
        assert_eq!(crc32c::crc32c(c.envelope().payload()), crc);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_frames_through_a_small_window_arrive_complete_and_in_order() {
    let ((a, _ai), (_b, mut bi)) = connected_pair(
        config(1, 1).app_queue(QueueLimits::new(8, 1 << 20).unwrap()),
        config(2, 1).app_window(Window {
            count: 3,
            bytes: 300,
        }),
    )
    .await;
    let peer = a.peer(&rid(2)).unwrap();
    let sender = tokio::spawn(async move {
        for i in 0u32..2_000 {
            let e = Envelope::one_way(
                a.ids().next_operation_id().unwrap(),
                a.routing_id(),
                a.lifecycle_generation(),
                Bytes::copy_from_slice(&i.to_be_bytes()),
            );
            peer.send_app(&e).await.unwrap();
        }
        a
    });
    for i in 0u32..2_000 {
        let f = tokio::time::timeout(WAIT, bi.app.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(f.envelope().payload().as_ref(), i.to_be_bytes());
    }
    sender.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_and_small_frames_interleaved_arrive_whole_and_in_order() {
    let ((_a, mut ai), (b, _bi)) = connected_pair(config(1, 1), config(2, 1)).await;
    let to_a = b.peer(&rid(1)).unwrap();
    let prefix = b"head:";
    // The frame's length: the envelope's encoding with the prefix.
    let overhead = one_way(&b, Bytes::new()).encoded_len() + prefix.len();
    // Frames just below, at and past the size written without the gathering copy, between
    // small ones gathered around them.
    let direct = 64 * 1024;
    let sizes = [
        3,
        direct - 1 - overhead,
        5,
        direct - overhead,
        7,
        direct + 1 - overhead,
        1024 * 1024,
        9,
    ];
    let payloads: Vec<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(n, &size)| {
            (0..size)
                .map(|i| (i * 7 + n) as u8)
                .collect::<Vec<u8>>()
                .into()
        })
        .collect();
    for p in &payloads {
        to_a.send_control_prefixed(&one_way(&b, p.clone()), prefix)
            .await
            .unwrap();
    }
    for p in &payloads {
        let c = tokio::time::timeout(WAIT, ai.control.recv())
            .await
            .unwrap()
            .unwrap();
        let got = c.envelope().payload();
        assert_eq!(got.len(), prefix.len() + p.len());
        assert_eq!(&got[..prefix.len()], prefix);
        assert_eq!(&got[prefix.len()..], &p[..]);
    }
}
