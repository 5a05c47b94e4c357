//! The codec-fair baseline of `bench mesh`: raw framed TCP (the `raw` cases of
//! `bench transport`) doing the same serde JSON work per message as a MeshNode call. The client
//! encodes the message struct (`{"bytes": "…"}`) into each frame and decodes each reply as a
//! JSON string; the server (`peer --raw-json`) decodes every frame and encodes each reply. What
//! is left between this and the MeshNode is framework cost, not codec cost.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::codec::{Decoder, LengthDelimitedCodec};
use zlink_transport::MAX_FRAME_LEN;

/// The message body both sides encode and decode (the bench's `Echo` / `Blob`).
#[derive(Serialize)]
struct Text<'a> {
    bytes: &'a str,
}

fn to_string(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

/// Appends one length-prefixed frame: tag byte (1 request, 0 one-way), then `text` as JSON.
fn put_frame(buf: &mut BytesMut, tag: u8, text: &str) -> Result<(), String> {
    let at = buf.len();
    buf.put_u32(0);
    buf.put_u8(tag);
    serde_json::to_writer((&mut *buf).writer(), &Text { bytes: text }).map_err(to_string)?;
    let len = u32::try_from(buf.len() - at - 4).map_err(to_string)?;
    buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Decodes a reply frame (tag byte, then a JSON string) and checks its length.
fn check_reply(frame: &[u8], want: usize) -> Result<(), String> {
    let text: String =
        serde_json::from_slice(frame.get(1..).unwrap_or_default()).map_err(to_string)?;
    if text.len() != want {
        return Err("wrong echo".into());
    }
    Ok(())
}

async fn connect(addr: &str) -> Result<TcpStream, String> {
    let s = TcpStream::connect(addr).await.map_err(to_string)?;
    s.set_nodelay(true).map_err(to_string)?;
    Ok(s)
}

/// One-way frames for `d` (written whenever 64 KiB are gathered), then one request whose
/// reply shows the server decoded every frame.
pub(crate) async fn one_way(
    addr: &str,
    text: &str,
    d: Duration,
) -> Result<(u64, Duration), String> {
    let mut s = connect(addr).await?;
    let mut codec = codec();
    let mut buf = BytesMut::with_capacity(128 * 1024);
    let started = Instant::now();
    let mut sent: u64 = 0;
    loop {
        for _ in 0..1024 {
            put_frame(&mut buf, 0, text)?;
            sent += 1;
            if buf.len() >= 64 * 1024 {
                s.write_all(&buf).await.map_err(to_string)?;
                buf.clear();
            }
        }
        if started.elapsed() >= d {
            break;
        }
    }
    put_frame(&mut buf, 1, text)?;
    s.write_all(&buf).await.map_err(to_string)?;
    let mut rbuf = BytesMut::with_capacity(4096);
    loop {
        if let Some(f) = codec.decode(&mut rbuf).map_err(to_string)? {
            check_reply(&f, text.len())?;
            break;
        }
        if s.read_buf(&mut rbuf).await.map_err(to_string)? == 0 {
            return Err("raw server closed".into());
        }
    }
    Ok((sent, started.elapsed()))
}

/// `c` requests in flight for `d`; each decoded reply lets the next request go.
pub(crate) async fn request_response(
    addr: &str,
    text: &str,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let mut s = connect(addr).await?;
    let mut codec = codec();
    let mut wbuf = BytesMut::with_capacity(64 * 1024);
    let mut rbuf = BytesMut::with_capacity(64 * 1024);
    let mut in_flight: VecDeque<Instant> = VecDeque::with_capacity(c);
    let mut samples = Vec::new();
    let started = Instant::now();
    for _ in 0..c {
        in_flight.push_back(Instant::now());
        put_frame(&mut wbuf, 1, text)?;
    }
    s.write_all(&wbuf).await.map_err(to_string)?;
    wbuf.clear();
    let mut stopping = false;
    while !in_flight.is_empty() {
        rbuf.reserve(64 * 1024);
        if s.read_buf(&mut rbuf).await.map_err(to_string)? == 0 {
            return Err("raw server closed".into());
        }
        while let Some(f) = codec.decode(&mut rbuf).map_err(to_string)? {
            check_reply(&f, text.len())?;
            let sent_at = in_flight.pop_front().ok_or("reply without a request")?;
            samples.push(sent_at.elapsed());
            if !stopping && started.elapsed() >= d {
                stopping = true;
            }
            if !stopping {
                in_flight.push_back(Instant::now());
                put_frame(&mut wbuf, 1, text)?;
            }
        }
        if !wbuf.is_empty() {
            s.write_all(&wbuf).await.map_err(to_string)?;
            wbuf.clear();
        }
    }
    Ok((samples, started.elapsed()))
}
