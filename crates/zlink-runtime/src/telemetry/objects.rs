//! The object instruments of one object host (routes, creations), resolved once when the
//! host is built. Timer ticks are sampled from the node's tick counters (`host.rs`).

use metrics::Counter;

use super::labels::{CreationOutcome, ObjectLabel, RouteLabel};
use super::names;

/// Route sources and creations of one object host.
#[derive(Debug, Clone)]
pub(crate) struct ObjectMetrics {
    /// `[source]`: live, cache, store, follow.
    routes: [Counter; 4],
    /// `[kind][outcome]`: actor/spot × created/existing/failed.
    creations: [[Counter; 3]; 2],
}

const ROUTES: [RouteLabel; 4] = [
    RouteLabel::Live,
    RouteLabel::Cache,
    RouteLabel::Store,
    RouteLabel::Follow,
];
const OBJECTS: [ObjectLabel; 2] = [ObjectLabel::Actor, ObjectLabel::Spot];
const CREATIONS: [CreationOutcome; 3] = [
    CreationOutcome::Created,
    CreationOutcome::Existing,
    CreationOutcome::Failed,
];

impl ObjectMetrics {
    /// Resolves every handle with the recorder installed now (none: no-op handles).
    pub(crate) fn new() -> Self {
        super::describe();
        Self {
            routes: ROUTES.map(|r| metrics::counter!(names::OBJECT_ROUTES, "source" => r.as_str())),
            creations: OBJECTS.map(|k| {
                CREATIONS.map(|o| {
                    metrics::counter!(names::OBJECT_CREATIONS, "kind" => k.as_str(), "outcome" => o.as_str())
                })
            }),
        }
    }

    /// An object call found its owner through `source`.
    pub(crate) fn route(&self, source: RouteLabel) {
        let i = match source {
            RouteLabel::Live => 0,
            RouteLabel::Cache => 1,
            RouteLabel::Store => 2,
            RouteLabel::Follow => 3,
        };
        self.routes[i].increment(1);
    }

    /// A creation call ended.
    pub(crate) fn creation(&self, kind: ObjectLabel, outcome: CreationOutcome) {
        let k = match kind {
            ObjectLabel::Actor => 0,
            ObjectLabel::Spot => 1,
        };
        let o = match outcome {
            CreationOutcome::Created => 0,
            CreationOutcome::Existing => 1,
            CreationOutcome::Failed => 2,
        };
        self.creations[k][o].increment(1);
    }
}

impl Default for ObjectMetrics {
    fn default() -> Self {
        Self::new()
    }
}
