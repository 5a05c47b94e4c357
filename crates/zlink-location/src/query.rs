//! Operational location queries (spec 21 §7.4): lookup by ActorId / SpotId and a paged list
//! per object kind, for operators' tools. Results show status only: they expose no
//! StoreVersion, record bytes or Store, are never cached (a Missing, Creating or failed answer
//! is never remembered as "the object does not exist") and are no message target list or
//! placement condition.
//!
//! **Lookup** reads the authority row by an exact read. A Reserved record is
//! [`EntryState::Creating`]; an Active one is [`EntryState::Ready`] only while its owner's lease
//! row, read directly, holds exactly the record's `(ownerId, leaseGeneration)`, otherwise
//! [`EntryState::Unavailable`]. A missing row is `None`: nothing is built or written.
//!
//! **List** reads the lookup index rows (`location-index\0{kind}\0[{stableType}\0]`) by one
//! snapshot scan (spec 21 §6.2) and resolves each to its authority record by an exact read;
//! an index row whose record is gone or now holds another kind or stable type is left out (the
//! new object appears in a later cycle). Corrupt or foreign data costs only its entry: an index
//! row the Store cannot read, or whose authority row the Store cannot read or the codec
//! rejects, is left out (logged). The MeshName filter applies to the record's node.
//! Every page of a cycle reads the snapshot fixed by the cycle's first page, so no id appears
//! twice in a cycle; a change completed during the cycle may first appear in the next one.
//!
//! **Page size.** One page holds at most `page_size` (1..=1000) entries and its *encoded size*
//! — the sum of each entry's canonical JSON length ([`LocationEntry::to_json`]) plus
//! [`PageToken::MAX_LEN`] for the token — is at most 4 MiB. Store pages are requested small
//! enough that every fetched entry fits even at its largest ([`MAX_ENTRY_LEN`]); when less room
//! than that is left, the next item is fetched alone and, if it would cross the bound, the page
//! ends and that entry starts the next page (the token re-reads it). A page may hold fewer
//! entries than `page_size` (even none, after many filtered items); only `next == None` ends
//! the cycle.

use std::sync::Arc;

use serde::Serialize;
use zlink_codec::records::AllocationState;
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{
    DynLocationStore, LocationStore, MAX_PAGE_ENCODED_LEN, PageLimit, ScanCursor, ScanPrefix,
    ScanRequest, ScanResult, StoreError,
};

use super::authority::{AuthorityClient, AuthorityHandle, AuthorityRead};
use super::error::{InvalidOperation, LocationError, RecordName};
use super::generation::ObjectGeneration;
use super::identity::{MeshName, ObjectId, ObjectKind, OwnerId, RoutingId, StableType};
use super::keys;
use super::lease::{LeaseSeen, lease_key};

/// The largest page size of [`LocationRuntime::list`](super::LocationRuntime::list).
pub const MAX_PAGE_SIZE: u32 = 1000;

/// The largest canonical JSON length of one [`LocationEntry`]: three names of 255 bytes, each
/// byte escaped to at most 6 (`\u001f`), a 510-digit routing id, a 20-digit generation, the
/// longest kind and state, and 128 bytes of field names and punctuation.
pub const MAX_ENTRY_LEN: usize = 3 * 6 * 255 + 2 * 255 + 20 + 12 + 11 + 128;

/// How many store pages one list page reads at most (a heavily filtered list returns a short
/// page with a token rather than scanning without bound).
const STORE_PAGES_PER_PAGE: usize = 64;

/// How many times the first page of a cycle starts a new snapshot after its own expired.
const FIRST_PAGE_ATTEMPTS: usize = 4;

/// Which authority row a lookup reads: ActorId and SpotId are separate key spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LookupKind {
    /// An ActorId.
    Actor,
    /// A SpotId (User or Instance Spot).
    Spot,
}

/// The state of one object as an operational query shows it (spec 21 §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryState {
    /// Reserved: the factory has not committed yet.
    Creating,
    /// Committed, and the owner's lease is held by the run that owns the record.
    Ready,
    /// Committed, but the owner's lease is gone, expired or held by another run.
    Unavailable,
}

impl EntryState {
    /// `creating`, `ready` or `unavailable`.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Creating => "creating",
            EntryState::Ready => "ready",
            EntryState::Unavailable => "unavailable",
        }
    }
}

/// One object's current location (spec 21 §7.4). MeshName and routing id show the node at
/// query time; they are no message target.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocationEntry {
    /// The global ActorId / SpotId.
    pub id: ObjectId,
    /// The object kind.
    pub kind: ObjectKind,
    /// The stable type.
    pub stable_type: StableType,
    /// The ObjectGeneration.
    pub object_generation: ObjectGeneration,
    /// The mesh of the owning node.
    pub mesh: MeshName,
    /// The owning node's routing id.
    pub routing_id: RoutingId,
    /// The state.
    pub state: EntryState,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryWire<'a> {
    id: &'a str,
    kind: &'a str,
    stable_type: &'a str,
    object_generation: String,
    mesh_name: &'a str,
    node_rid: String,
    state: &'a str,
}

impl LocationEntry {
    fn of(handle: &AuthorityHandle, state: EntryState) -> Self {
        let node = handle.node();
        LocationEntry {
            id: handle.id().clone(),
            kind: handle.kind(),
            stable_type: handle.stable_type().clone(),
            object_generation: handle.object_generation(),
            mesh: node.mesh,
            routing_id: node.routing_id,
            state,
        }
    }

    /// The canonical JSON form: `{"id","kind","stableType","objectGeneration" (decimal
    /// string),"meshName","nodeRid" (lowercase hex),"state"}` in this order, no whitespace.
    /// Its length is what the entry counts for against the 4 MiB page bound.
    pub fn to_json(&self) -> Result<Vec<u8>, LocationError> {
        serde_json::to_vec(&EntryWire {
            id: self.id.as_str(),
            kind: self.kind.as_str(),
            stable_type: self.stable_type.as_str(),
            object_generation: self.object_generation.to_string(),
            mesh_name: self.mesh.as_str(),
            node_rid: self.routing_id.to_hex(),
            state: self.state.as_str(),
        })
        .map_err(|_| {
            InvalidOperation::RowEncoding {
                record: RecordName::LocationIndex,
            }
            .into()
        })
    }
}

/// What a paged list reads: an object kind (required), optionally one stable type and one
/// MeshName.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ListFilter {
    /// The object kind.
    pub kind: ObjectKind,
    /// Only this stable type.
    pub stable_type: Option<StableType>,
    /// Only objects on nodes of this mesh.
    pub mesh: Option<MeshName>,
}

impl ListFilter {
    /// Every object of `kind`.
    pub fn new(kind: ObjectKind) -> Self {
        ListFilter {
            kind,
            stable_type: None,
            mesh: None,
        }
    }

    /// Only objects of this stable type.
    pub fn stable_type(mut self, stable_type: StableType) -> Self {
        self.stable_type = Some(stable_type);
        self
    }

    /// Only objects on nodes of this mesh.
    pub fn mesh(mut self, mesh: MeshName) -> Self {
        self.mesh = Some(mesh);
        self
    }
}

/// One page of a list cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Page {
    /// The entries, in lookup-index key order.
    pub entries: Vec<LocationEntry>,
    /// The token of the next page; `None` ends the cycle.
    pub next: Option<PageToken>,
}

/// An opaque continuation token: applications pass it back unchanged. It carries the list's
/// filter and the Store's snapshot cursor, so every page of a cycle reads one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageToken(Vec<u8>);

const TOKEN_MAGIC: &[u8; 4] = b"zlq1";

struct TokenBody {
    filter: ListFilter,
    cursor: ScanCursor,
}

impl PageToken {
    /// The largest token: magic, kind, and three length-prefixed fields (stable type, mesh,
    /// a 4,096-byte store cursor).
    pub const MAX_LEN: usize = 4 + 1 + (2 + 255) * 2 + 2 + 4096;

    /// The token's bytes (to keep it between requests).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// A token from bytes kept earlier; anything this runtime could not have issued is
    /// [`InvalidOperation::MalformedPageToken`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, LocationError> {
        Self::decode(bytes)?;
        Ok(PageToken(bytes.to_vec()))
    }

    fn encode(filter: &ListFilter, cursor: &ScanCursor) -> Self {
        let mut out = Vec::with_capacity(16 + cursor.len());
        out.extend_from_slice(TOKEN_MAGIC);
        out.push(kind_code(filter.kind));
        let fields = [
            filter.stable_type.as_ref().map_or("", |t| t.as_str()),
            filter.mesh.as_ref().map_or("", |m| m.as_str()),
            cursor.as_str(),
        ];
        for f in fields {
            // Every field is at most 4,096 bytes (bounded types), so it fits a u16.
            out.extend_from_slice(&(f.len() as u16).to_be_bytes());
            out.extend_from_slice(f.as_bytes());
        }
        PageToken(out)
    }

    fn decode(bytes: &[u8]) -> Result<TokenBody, LocationError> {
        let bad = || LocationError::from(InvalidOperation::MalformedPageToken);
        let rest = bytes.strip_prefix(TOKEN_MAGIC.as_slice()).ok_or_else(bad)?;
        let (&code, mut rest) = rest.split_first().ok_or_else(bad)?;
        let kind = [
            ObjectKind::Actor,
            ObjectKind::UserSpot,
            ObjectKind::InstanceSpot,
        ]
        .into_iter()
        .find(|k| kind_code(*k) == code)
        .ok_or_else(bad)?;
        let mut fields = Vec::with_capacity(3);
        for _ in 0..3 {
            let (len, tail) = rest.split_at_checked(2).ok_or_else(bad)?;
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            let (field, tail) = tail.split_at_checked(len).ok_or_else(bad)?;
            fields.push(std::str::from_utf8(field).map_err(|_| bad())?.to_owned());
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(bad());
        }
        let cursor = ScanCursor::new(fields.pop().ok_or_else(bad)?).map_err(|_| bad())?;
        let optional = |s: String| (!s.is_empty()).then_some(s);
        let mesh = optional(fields.pop().ok_or_else(bad)?)
            .map(MeshName::new)
            .transpose()
            .map_err(|_| bad())?;
        let stable_type = optional(fields.pop().ok_or_else(bad)?)
            .map(StableType::new)
            .transpose()
            .map_err(|_| bad())?;
        Ok(TokenBody {
            filter: ListFilter {
                kind,
                stable_type,
                mesh,
            },
            cursor,
        })
    }
}

fn kind_code(kind: ObjectKind) -> u8 {
    match kind {
        ObjectKind::Actor => 0,
        ObjectKind::UserSpot => 1,
        ObjectKind::InstanceSpot => 2,
    }
}

/// The byte budget of one page: entries are added while the page's encoded size (entries plus
/// [`PageToken::MAX_LEN`]) stays within 4 MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageBudget {
    used: usize,
}

impl PageBudget {
    /// The most bytes of entries one page holds.
    pub(crate) const ENTRY_BYTES: usize = MAX_PAGE_ENCODED_LEN - PageToken::MAX_LEN;

    pub(crate) fn new() -> Self {
        PageBudget { used: 0 }
    }

    /// Adds an entry of `len` bytes if the page stays within the bound; `false` leaves the
    /// budget unchanged (that entry starts the next page).
    pub(crate) fn try_add(&mut self, len: usize) -> bool {
        match self.used.checked_add(len) {
            Some(total) if total <= Self::ENTRY_BYTES => {
                self.used = total;
                true
            }
            _ => false,
        }
    }

    /// How many entries of the largest size still fit for sure.
    pub(crate) fn sure_room(&self) -> usize {
        (Self::ENTRY_BYTES - self.used) / MAX_ENTRY_LEN
    }
}

/// The operational queries of one runtime.
pub(crate) struct Query<'a> {
    pub store: &'a Arc<dyn DynLocationStore>,
    pub authority: &'a AuthorityClient,
}

impl Query<'_> {
    /// Lookup by id (spec 21 §7.4): `None` for a missing record.
    pub(crate) async fn lookup(
        &self,
        kind: LookupKind,
        id: &ObjectId,
    ) -> Result<Option<LocationEntry>, LocationError> {
        let kind = match kind {
            LookupKind::Actor => ObjectKind::Actor,
            // Every Spot kind shares one authority row per SpotId.
            LookupKind::Spot => ObjectKind::UserSpot,
        };
        let mut leases = HashMap::default();
        match self.authority.read(kind, id).await? {
            AuthorityRead::Missing { .. } => Ok(None),
            AuthorityRead::Found { handle, .. } => {
                let state = self.state_of(&handle, &mut leases).await?;
                Ok(Some(LocationEntry::of(&handle, state)))
            }
        }
    }

    async fn state_of(
        &self,
        handle: &AuthorityHandle,
        leases: &mut HashMap<OwnerId, LeaseSeen>,
    ) -> Result<EntryState, LocationError> {
        if handle.state() == AllocationState::Reserved {
            return Ok(EntryState::Creating);
        }
        let owner = handle.owner();
        let seen = match leases.get(&owner.owner_id) {
            Some(seen) => seen,
            None => {
                let read = self.store.read(&lease_key(&owner.owner_id)?).await?;
                leases
                    .entry(owner.owner_id.clone())
                    .or_insert(LeaseSeen::from_read(&read))
            }
        };
        Ok(if seen.held_by(owner) {
            EntryState::Ready
        } else {
            EntryState::Unavailable
        })
    }

    /// One page of a list cycle (spec 21 §7.4, §6.2).
    pub(crate) async fn list(
        &self,
        filter: &ListFilter,
        page_size: u32,
        token: Option<&PageToken>,
    ) -> Result<Page, LocationError> {
        if page_size == 0 || page_size > MAX_PAGE_SIZE {
            return Err(InvalidOperation::PageSizeOutOfRange(page_size).into());
        }
        let cursor = match token {
            None => None,
            Some(t) => {
                let body = PageToken::decode(t.as_bytes())?;
                if &body.filter != filter {
                    return Err(InvalidOperation::PageTokenForAnotherList.into());
                }
                Some(body.cursor)
            }
        };
        let prefix = keys::location_index_prefix(filter.kind, filter.stable_type.as_ref())?;
        let size = page_size as usize;
        for _ in 0..FIRST_PAGE_ATTEMPTS {
            match self.assemble(filter, &prefix, size, cursor.clone()).await? {
                Some(page) => return Ok(page),
                // A continuation's snapshot is gone: the cycle cannot go on without duplicates.
                None if cursor.is_some() => return Err(LocationError::ScanExpired),
                None => continue,
            }
        }
        Err(LocationError::Contended)
    }

    /// Reads one page from `cursor` (`None`: a new snapshot); `None` if the snapshot expired.
    async fn assemble(
        &self,
        filter: &ListFilter,
        prefix: &ScanPrefix,
        size: usize,
        mut cursor: Option<ScanCursor>,
    ) -> Result<Option<Page>, LocationError> {
        let mut entries = Vec::new();
        let mut budget = PageBudget::new();
        let mut leases = HashMap::default();
        for _ in 0..STORE_PAGES_PER_PAGE {
            // Every fetched entry fits for sure, or else one item is fetched alone.
            let limit = (size - entries.len()).min(budget.sure_room()).max(1);
            let request = match &cursor {
                None => ScanRequest::first(prefix.clone(), PageLimit::new(limit)?),
                Some(c) => ScanRequest::next(prefix.clone(), PageLimit::new(limit)?, c.clone()),
            };
            let page = match self.store.scan(&request).await? {
                ScanResult::Expired => return Ok(None),
                ScanResult::Page(p) => p,
            };
            let kept = entries.len();
            for u in &page.unreadable {
                tracing::warn!(key = %u.key, kind = %u.kind, "lookup index row left out: the Store cannot read it");
            }
            for item in &page.items {
                let Some(entry) = self.resolve(filter, &item.key, &mut leases).await? else {
                    continue;
                };
                if budget.try_add(entry.to_json()?.len()) {
                    entries.push(entry);
                    continue;
                }
                // The entry would cross 4 MiB: the page ends before this store page, which
                // the next page reads again from the same cursor (same snapshot).
                let Some(c) = &cursor else {
                    // A cycle's first store page is fetched into an empty budget with a limit
                    // every entry of at most MAX_ENTRY_LEN fits: field bounds make this
                    // unreachable.
                    return Err(InvalidOperation::RowEncoding {
                        record: RecordName::LocationIndex,
                    }
                    .into());
                };
                entries.truncate(kept);
                return Ok(Some(Page {
                    entries,
                    next: Some(PageToken::encode(filter, c)),
                }));
            }
            cursor = page.next_cursor;
            if cursor.is_none() {
                return Ok(Some(Page {
                    entries,
                    next: None,
                }));
            }
            if entries.len() >= size {
                break;
            }
        }
        let next = cursor.as_ref().map(|c| PageToken::encode(filter, c));
        Ok(Some(Page { entries, next }))
    }

    /// The current entry of one lookup index row, `None` if its record is gone, holds another
    /// kind or stable type, or lies outside the mesh filter.
    async fn resolve(
        &self,
        filter: &ListFilter,
        key: &zlink_store_spi::StoreKey,
        leases: &mut HashMap<OwnerId, LeaseSeen>,
    ) -> Result<Option<LocationEntry>, LocationError> {
        let Some((kind, stable_type, id)) = keys::parse_location_index(key) else {
            tracing::warn!(%key, "lookup index key left out: not an index key");
            return Ok(None);
        };
        let handle = match self.authority.read(kind, &id).await {
            Ok(AuthorityRead::Missing { .. }) => return Ok(None),
            Ok(AuthorityRead::Found { handle, .. }) => handle,
            // Corrupt or foreign data costs only this entry.
            Err(LocationError::Store(StoreError::Unreadable(u))) => {
                tracing::warn!(key = %u.key, kind = %u.kind, "location entry left out: the Store cannot read its authority row");
                return Ok(None);
            }
            Err(e @ (LocationError::Decode { .. } | LocationError::CorruptRecord { .. })) => {
                tracing::warn!(%key, error = %e, "location entry left out: its authority row does not decode");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if handle.kind() != kind || handle.stable_type() != &stable_type {
            return Ok(None);
        }
        if filter
            .mesh
            .as_ref()
            .is_some_and(|m| &handle.node().mesh != m)
        {
            return Ok(None);
        }
        let state = self.state_of(&handle, leases).await?;
        Ok(Some(LocationEntry::of(&handle, state)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_budget_takes_an_entry_at_the_bound_and_starts_the_next_page_one_past() {
        let bound = PageBudget::ENTRY_BYTES;
        assert_eq!(bound + PageToken::MAX_LEN, MAX_PAGE_ENCODED_LEN);
        // Synthetic entries filling the page exactly to the bound: all taken.
        let mut page = PageBudget::new();
        let sizes = [bound / 2, bound - bound / 2 - 1, 1];
        assert!(sizes.iter().all(|&len| page.try_add(len)));
        // One byte past: refused, the budget unchanged, and it starts the next page.
        let mut page = PageBudget::new();
        assert!(page.try_add(bound / 2));
        assert!(page.try_add(bound - bound / 2 - 1));
        let before = page;
        assert!(!page.try_add(2), "an entry crossing the bound is refused");
        assert_eq!(page, before);
        let mut next = PageBudget::new();
        assert!(next.try_add(2));
        assert!(!PageBudget::new().try_add(bound + 1));
        // Room for sure shrinks with use and never promises a crossing.
        assert_eq!(PageBudget::new().sure_room(), bound / MAX_ENTRY_LEN);
        assert_eq!(before.sure_room(), 0);
    }

    #[test]
    fn the_largest_entry_fits_max_entry_len_and_a_full_page_can_cross_4_mib() {
        let worst = "\u{1}".repeat(255);
        let entry = LocationEntry {
            id: ObjectId::new(worst.clone()).expect("id"),
            kind: ObjectKind::InstanceSpot,
            stable_type: StableType::new(worst.clone()).expect("type"),
            object_generation: ObjectGeneration::new((1 << 63) - 2).expect("generation"),
            mesh: MeshName::new(worst).expect("mesh"),
            routing_id: RoutingId::new(vec![0xff; 255]).expect("rid"),
            state: EntryState::Unavailable,
        };
        let len = entry.to_json().expect("json").len();
        assert!(len <= MAX_ENTRY_LEN, "{len} > {MAX_ENTRY_LEN}");
        assert!(len + 64 > MAX_ENTRY_LEN, "the bound is tight");
        // 1,000 such entries exceed 4 MiB: the byte bound is real.
        assert!(1000 * len > PageBudget::ENTRY_BYTES);
    }

    #[test]
    fn page_tokens_round_trip_and_reject_malformed_bytes() {
        let filter = ListFilter::new(ObjectKind::UserSpot)
            .stable_type(StableType::new("game").expect("t"))
            .mesh(MeshName::new("east").expect("m"));
        let cursor = ScanCursor::new("c".repeat(4096)).expect("cursor");
        let token = PageToken::encode(&filter, &cursor);
        let long = ListFilter::new(ObjectKind::Actor)
            .stable_type(StableType::new("t".repeat(255)).expect("t"))
            .mesh(MeshName::new("m".repeat(255)).expect("m"));
        assert_eq!(
            PageToken::encode(&long, &cursor).as_bytes().len(),
            PageToken::MAX_LEN
        );
        let back = PageToken::decode(token.as_bytes()).expect("decode");
        assert_eq!(back.filter, filter);
        assert_eq!(back.cursor, cursor);
        assert_eq!(
            PageToken::from_bytes(token.as_bytes()).expect("token"),
            token
        );
        let bytes = token.as_bytes();
        let mut extra = bytes.to_vec();
        extra.push(0);
        for bad in [
            &bytes[..bytes.len() - 1],
            &extra[..],
            &bytes[1..],
            b"zlq1\x01",
        ] {
            assert!(matches!(
                PageToken::from_bytes(bad),
                Err(LocationError::InvalidOperation(
                    InvalidOperation::MalformedPageToken
                ))
            ));
        }
        // An empty cursor field is no cursor.
        assert!(PageToken::from_bytes(b"zlq1\x00\x00\x00\x00\x00\x00\x00").is_err());
    }
}
