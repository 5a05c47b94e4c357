//! Where an object call found its owner: an activation live here, the route cache, a read of
//! the Store, or Message
//! Follow (the old owner forwarded it to the object's new owner; spec 21 §7.3). Recorded on
//! the call's tracing span (`zlink.object.call`, field `route`) and counted on
//! `zlink.objects.route` (label `source`).

/// How one object call reached its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum RouteSource {
    /// An activation live on this node took the call (no cache, no Store read).
    Live,
    /// The route cache named the owner.
    Cache,
    /// The owner was read from the Location Store (no cached route, or the cached owner was
    /// unreachable and the record was read again).
    Store,
    /// The owner addressed had moved the object: Message Follow forwarded the call to the new
    /// owner, which answered.
    Follow,
}

impl RouteSource {
    /// The span field value: `live`, `cache`, `store` or `follow`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Cache => "cache",
            Self::Store => "store",
            Self::Follow => "follow",
        }
    }
}

/// The span of one object call (level `debug`; the `route` field is recorded once known).
pub(crate) fn call_span(route: crate::messaging::RouteKind, id: &str) -> tracing::Span {
    tracing::debug_span!(
        "zlink.object.call",
        kind = %route,
        id,
        route = tracing::field::Empty
    )
}

/// Records where the call found its owner on `span`.
pub(crate) fn record(span: &tracing::Span, source: RouteSource) {
    span.record("route", source.as_str());
}

impl RouteSource {
    /// The metrics label of this source.
    pub(crate) fn label(self) -> crate::telemetry::labels::RouteLabel {
        use crate::telemetry::labels::RouteLabel;
        match self {
            Self::Live => RouteLabel::Live,
            Self::Cache => RouteLabel::Cache,
            Self::Store => RouteLabel::Store,
            Self::Follow => RouteLabel::Follow,
        }
    }
}

impl super::host::ObjectHost {
    /// An object call found its owner through `source`: on its span and in the metrics.
    pub(crate) fn route_found(&self, span: &tracing::Span, source: RouteSource) {
        record(span, source);
        self.metrics.route(source.label());
    }
}
