//! `zlink locate` and `zlink list`: the operational lookup and paged list of spec 21 §7.4,
//! through `zlink-location`'s [`LocationReader`], which holds no owner lease and writes
//! nothing. They show the owner node and state only: no key, StoreVersion or page token is
//! printed. No `zlink` command writes the Store.

use std::sync::Arc;

use serde::Serialize;
use zlink_location::{
    ListFilter, LocationEntry, LocationOptions, LocationReader, LookupKind, MeshName, ObjectId,
    ObjectKind, PageToken, StableType,
};
use zlink_store_spi::DynLocationStore;

use crate::error::CliError;

/// One object's location as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryView {
    /// The ActorId / SpotId.
    pub id: String,
    /// `actor`, `userSpot` or `instanceSpot`.
    pub kind: String,
    /// The stable type.
    pub stable_type: String,
    /// The ObjectGeneration.
    pub object_generation: u64,
    /// The owning node's mesh.
    pub mesh: String,
    /// The owning node's routing id (lowercase hex).
    pub owner_rid: String,
    /// `creating`, `ready` or `unavailable`.
    pub state: String,
}

impl From<&LocationEntry> for EntryView {
    fn from(e: &LocationEntry) -> Self {
        EntryView {
            id: e.id.as_str().to_owned(),
            kind: e.kind.as_str().to_owned(),
            stable_type: e.stable_type.as_str().to_owned(),
            object_generation: e.object_generation.get(),
            mesh: e.mesh.as_str().to_owned(),
            owner_rid: e.routing_id.to_hex(),
            state: e.state.as_str().to_owned(),
        }
    }
}

/// The queries over one Location Store (see the module docs).
pub struct QueryRuntime {
    runtime: LocationReader,
}

impl std::fmt::Debug for QueryRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryRuntime").finish_non_exhaustive()
    }
}

impl QueryRuntime {
    /// A reader over `store` (nothing is written).
    pub async fn start(store: Arc<dyn DynLocationStore>) -> Result<Self, CliError> {
        let runtime = LocationReader::new(store, &LocationOptions::default())?;
        Ok(QueryRuntime { runtime })
    }

    /// The lookup of one ActorId (`actor`) or SpotId (`spot`): `None` when no record exists.
    pub async fn locate(&self, kind: LookupKind, id: &str) -> Result<Option<EntryView>, CliError> {
        let id = ObjectId::new(id).map_err(|e| CliError::input("id", e.to_string()))?;
        Ok(self
            .runtime
            .lookup(kind, &id)
            .await?
            .as_ref()
            .map(EntryView::from))
    }

    /// Every entry of the list of `kind` (optionally one stable type and mesh), page by page
    /// (`page_size` in 1..=1000), each page handed to `page` as it arrives.
    pub async fn list(
        &self,
        kind: ObjectKind,
        stable_type: Option<&str>,
        mesh: Option<&str>,
        page_size: u32,
        mut page: impl FnMut(Vec<EntryView>),
    ) -> Result<usize, CliError> {
        let mut filter = ListFilter::new(kind);
        if let Some(t) = stable_type {
            filter = filter.stable_type(
                StableType::new(t).map_err(|e| CliError::input("--stable-type", e.to_string()))?,
            );
        }
        if let Some(m) = mesh {
            filter = filter
                .mesh(MeshName::new(m).map_err(|e| CliError::input("--mesh", e.to_string()))?);
        }
        let mut token: Option<PageToken> = None;
        let mut total = 0;
        loop {
            let p = self
                .runtime
                .list(filter.clone(), page_size, token.as_ref())
                .await?;
            total += p.entries.len();
            page(p.entries.iter().map(EntryView::from).collect());
            match p.next {
                Some(next) => token = Some(next),
                None => return Ok(total),
            }
        }
    }

    /// Ends the queries (a reader holds nothing to release).
    pub async fn shutdown(self) -> Result<(), CliError> {
        Ok(())
    }
}
