//! The telemetry handles record on the recorder installed when they were resolved, sampled
//! values add up across hosts, and the metered store times every call.

use std::sync::Arc;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use zlink_codec::records::HostState;
use zlink_store_spi::{LocationStore, MemoryLocationStore, StoreKey};

use super::labels::{DropReason, MessageKind, SendPath};
use super::*;

fn recorder() -> PrometheusRecorder {
    PrometheusBuilder::new().build_recorder()
}

/// The value of the series whose line starts with `series ` in `text`.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn node_handles_record_on_the_recorder_they_were_resolved_with() {
    let rec = recorder();
    let node = metrics::with_local_recorder(&rec, NodeMetrics::new);
    // Used outside the recorder's scope: the handles keep their series.
    node.sent(MessageKind::Request, SendPath::Remote);
    node.sent(MessageKind::Request, SendPath::Remote);
    node.sent(MessageKind::OneWay, SendPath::Local);
    node.received(MessageKind::OneWay);
    node.dropped(DropReason::NotAdmitted);
    node.request_ended(std::time::Instant::now(), true);
    let text = rec.handle().render();
    assert_eq!(
        value(
            &text,
            r#"zlink_messages_sent{kind="request",path="remote"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value(&text, r#"zlink_messages_sent{kind="one_way",path="local"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"zlink_messages_received{kind="one_way"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"zlink_messages_dropped{reason="not_admitted"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"zlink_messages_dropped{reason="no_route"}"#),
        Some(0.0)
    );
    assert_eq!(
        value(&text, r#"zlink_request_duration_count{outcome="ok"}"#),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn handles_resolved_without_a_recorder_record_nowhere() {
    let rec = recorder();
    let node = NodeMetrics::new();
    metrics::with_local_recorder(&rec, || {
        node.sent(MessageKind::Request, SendPath::Remote);
    });
    assert!(
        !rec.handle().render().contains("zlink_messages_sent"),
        "a no-op handle stays a no-op"
    );
}

#[test]
fn the_host_state_gauge_counts_each_host_once_in_its_current_state() {
    let rec = recorder();
    let (a, b) =
        metrics::with_local_recorder(&rec, || (HostStateMetrics::new(), HostStateMetrics::new()));
    a.changed(HostState::Serving);
    b.changed(HostState::Serving);
    b.changed(HostState::Relocating);
    let text = rec.handle().render();
    assert_eq!(
        value(&text, r#"zlink_host_state{state="serving"}"#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        value(&text, r#"zlink_host_state{state="relocating"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"zlink_host_state{state="preparing"}"#),
        Some(0.0)
    );
    drop(b);
    let text = rec.handle().render();
    assert_eq!(
        value(&text, r#"zlink_host_state{state="relocating"}"#),
        Some(0.0)
    );
}

#[test]
fn sampled_values_of_two_hosts_add_up_and_leave_with_their_host() {
    let rec = recorder();
    let (a, b) = metrics::with_local_recorder(&rec, || (HostSamples::new(), HostSamples::new()));
    let sample = |jobs, renewed| Sample {
        mailbox_jobs: jobs,
        job_queue: jobs + 1,
        object_mailbox_jobs: 2 * jobs,
        renewals: [renewed, 0, 0],
        ..Sample::default()
    };
    a.publish(sample(3, 5));
    b.publish(sample(4, 2));
    a.publish(sample(1, 6));
    let text = rec.handle().render();
    assert_eq!(value(&text, "zlink_mailbox_jobs"), Some(5.0), "{text}");
    assert_eq!(value(&text, "zlink_job_queue_jobs"), Some(7.0), "{text}");
    assert_eq!(
        value(&text, "zlink_objects_mailbox_jobs"),
        Some(10.0),
        "{text}"
    );
    assert_eq!(
        value(&text, r#"zlink_lease_renewals{outcome="renewed"}"#),
        Some(8.0)
    );
    drop(a);
    let text = rec.handle().render();
    assert_eq!(value(&text, "zlink_mailbox_jobs"), Some(4.0));
    assert_eq!(value(&text, "zlink_job_queue_jobs"), Some(5.0));
    assert_eq!(value(&text, "zlink_objects_mailbox_jobs"), Some(8.0));
}

/// A store whose reads fail (`Unavailable`) and whose other calls never answer.
#[derive(Debug)]
struct Down;

impl LocationStore for Down {
    async fn read(
        &self,
        _: &StoreKey,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::ReadResult> {
        Err(zlink_store_spi::StoreError::failure_kind(
            zlink_store_spi::FailureKind::Unavailable,
        ))
    }
    async fn write(
        &self,
        _: &zlink_store_spi::WriteRequest,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::WriteResult> {
        std::future::pending().await
    }
    async fn scan(
        &self,
        _: &zlink_store_spi::ScanRequest,
    ) -> zlink_store_spi::StoreResult<zlink_store_spi::ScanResult> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn the_metered_store_times_every_call_and_counts_failures() {
    let rec = recorder();
    let (up, down) = metrics::with_local_recorder(&rec, || {
        (
            MeteredStore::wrap(Arc::new(MemoryLocationStore::new())),
            MeteredStore::wrap(Arc::new(Down)),
        )
    });
    let key = StoreKey::new("{t}/metered").expect("a valid key");
    assert!(up.read_dyn(&key).await.is_ok());
    assert!(up.read_dyn(&key).await.is_ok());
    let failed = down.read_dyn(&key).await;
    assert!(failed.is_err(), "the failure is returned as it is");
    let text = rec.handle().render();
    assert_eq!(
        value(
            &text,
            r#"zlink_store_duration_count{op="read",outcome="ok"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            r#"zlink_store_duration_count{op="read",outcome="failed"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"zlink_store_failures{op="read"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&text, r#"zlink_store_failures{op="write"}"#),
        Some(0.0)
    );
}
