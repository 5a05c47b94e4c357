//! Whether an object call was served from the route cache, re-read from the Store, or
//! forwarded by Message Follow is recorded on its tracing span (`zlink.object.call`, field
//! `route`).

use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};

use super::relocate_object::{Bump, Pair};
use super::support::*;
use crate::host::ObjectTarget;
use crate::host::config::ZLink;
use zlink_codec::records::ObjectRole;
use zlink_testkit::Harness;

/// Every `zlink.object.call` span in creation order, with the `route` values recorded on it.
#[derive(Clone, Default)]
struct Calls(Arc<Mutex<Vec<CallSpan>>>);

/// One call span and the `route` values recorded on it, in order.
type CallSpan = (Id, Vec<String>);

struct RouteField(Option<String>);
impl Visit for RouteField {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "route" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Calls {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        if attrs.metadata().name() == "zlink.object.call" {
            self.0.lock().push((id.clone(), Vec::new()));
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut v = RouteField(None);
        values.record(&mut v);
        if let Some(route) = v.0 {
            if let Some((_, routes)) = self.0.lock().iter_mut().find(|(i, _)| i == id) {
                routes.push(route);
            }
        }
    }
}

impl Calls {
    /// The last `route` of each call span, in order.
    fn last_routes(&self) -> Vec<String> {
        self.0
            .lock()
            .iter()
            .map(|(_, r)| r.last().cloned().unwrap_or_default())
            .collect()
    }

    fn clear(&self) {
        self.0.lock().clear();
    }
}

#[test]
fn the_call_span_says_whether_the_owner_was_live_here_or_came_from_the_store_the_cache_or_a_follow()
{
    let calls = Calls::default();
    let subscriber = tracing_subscriber::registry()
        .with(calls.clone())
        .with(tracing_subscriber::filter::LevelFilter::DEBUG);
    // One thread: the spans are made on the thread the subscriber is the default of.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tracing::subscriber::with_default(subscriber, || {
        rt.block_on(async {
            let h = Harness::memory();
            let p = Pair::start(&h).await;
            let client = ZLink::builder()
                .location_store(Arc::clone(&h.store))
                .location_options(fast_options())
                .route_mesh(mesh(), |n| n.object_role(ObjectRole::Client))
                .build()
                .start()
                .await
                .expect("client starts");
            wait_peers(&client.node(&mesh()).expect("node"), 2).await;
            let actors = client.actors().expect("actors");
            let servers = p.hosts[0].actors().expect("actors");
            let actor = servers.get_or_create("kept", "c1").await.expect("created");
            calls.clear();
            // Other tests of this process make and drop their own dispatchers on other
            // threads; a callsite's cached interest can be left at "never" by one of them, so
            // it is computed again with this test's subscriber alive.
            tracing::callsite::rebuild_interest_cache();
            actors.request("c1", &Bump).await.expect("first");
            actors.request("c1", &Bump).await.expect("second");
            assert_eq!(calls.last_routes(), ["store", "cache"]);

            // On the node that holds it, the live activation takes the call: no Store read and
            // no cached route.
            let from = p.index_of(&actor.node);
            let here = p.hosts[from].actors().expect("actors");
            calls.clear();
            tracing::callsite::rebuild_interest_cache();
            here.request("c1", &Bump).await.expect("here");
            here.request("c1", &Bump).await.expect("here again");
            assert_eq!(calls.last_routes(), ["live", "live"]);

            // The Actor moves; the client's cache still names the old owner, which follows.
            p.hosts[from]
                .relocate_object(actor, ObjectTarget::Node(p.rid(1 - from)))
                .await
                .expect("moved");
            calls.clear();
            tracing::callsite::rebuild_interest_cache();
            let (n, on) = actors.request("c1", &Bump).await.expect("followed");
            assert_eq!((n, on), (5, p.rid(1 - from).to_hex()));
            assert_eq!(calls.last_routes(), ["follow"]);
            stop_all(&[&client]).await;
            p.shutdown().await;
        });
    });
}
