//! Operational location queries (spec 21 §7.4): lookup by id and the paged list.

use std::collections::{BTreeMap, BTreeSet as Set};

use proptest::prelude::*;

use super::prelude::*;
use crate::{
    EntryState, ErrorKind, InvalidOperation, ListFilter, LocationEntry, LookupKind, MeshName, Page,
    PageToken,
};

/// The most pages one test cycle reads.
const MAX_PAGES: usize = 200;

/// A serving host on `mesh` with routing id `[rid]` offering actors `chat` and `mail` and
/// userSpot `game`.
async fn query_host(h: &Harness, mesh: &str, rid: u8, options: LocationOptions) -> Host {
    let mut desc = descriptor(mesh, &[rid]);
    desc.object_capabilities
        .push(capability(ObjectKind::Actor, "mail", 0));
    Host {
        rt: h.runtime_with(h.store.clone(), options, None).await,
        desc,
    }
}

/// One object of a test: kind, id, stable type, index of the owning host, committed.
type Object = (ObjectKind, String, &'static str, usize, bool);

/// Reserves every `(kind, id, stable type, target index)` concurrently (in chunks), and
/// commits those marked; returns nothing: the Store is the truth the test reads back.
async fn create(hosts: &[Arc<Host>], objects: &[Object]) {
    for chunk in objects.chunks(256) {
        let mut tasks = Vec::new();
        for (kind, object, stable_type, on, commit) in chunk.iter().cloned() {
            let host = hosts[on].clone();
            tasks.push(tokio::spawn(async move {
                let handle = reserve(&host, kind, &object, stable_type, &host).await;
                if commit {
                    host.rt
                        .authority()
                        .commit(&handle, None)
                        .await
                        .expect("commit")
                        .applied()
                        .expect("commit applied");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    }
}

/// Reads one whole cycle of `filter` with `page_size`; checks every page's bounds and that no
/// id appears twice.
async fn cycle(rt: &LocationRuntime, filter: &ListFilter, page_size: u32) -> Vec<LocationEntry> {
    let mut all = Vec::new();
    let mut seen = Set::new();
    let mut token: Option<PageToken> = None;
    for _ in 0..MAX_PAGES {
        let Page { entries, next } = rt
            .list(filter.clone(), page_size, token.as_ref())
            .await
            .expect("page");
        assert!(entries.len() <= page_size as usize, "page over its size");
        for e in entries {
            assert_eq!(e.kind, filter.kind);
            assert!(
                seen.insert(e.id.clone()),
                "{} returned twice",
                e.id.as_str()
            );
            all.push(e);
        }
        match next {
            Some(t) => token = Some(t),
            None => return all,
        }
    }
    panic!("the cycle did not end within {MAX_PAGES} pages");
}

fn ids(entries: &[LocationEntry]) -> Set<String> {
    entries.iter().map(|e| e.id.as_str().to_owned()).collect()
}

/// A missing id looks up as `None`, under both kinds, and the lookup writes nothing.
pub(super) async fn lookup_of_a_missing_id_is_none_and_creates_nothing(h: &Harness) {
    let a = query_host(h, "main", 1, LocationOptions::default()).await;
    let _present = active_actor(&a, "present").await;
    let before = h.snapshot().await;
    for kind in [LookupKind::Actor, LookupKind::Spot] {
        assert_eq!(
            a.rt.lookup(kind, &id("nobody")).await.expect("lookup"),
            None
        );
    }
    // The actor's id is another key space as a Spot.
    assert_eq!(
        a.rt.lookup(LookupKind::Spot, &id("present"))
            .await
            .expect("lookup"),
        None
    );
    assert_eq!(h.snapshot().await, before, "a lookup changed the Store");
}

/// A Reserved record is Creating, a committed one with a live owner Ready, and once the
/// owner's lease is gone the committed one is Unavailable (the reserved one stays Creating).
pub(super) async fn lookup_shows_creating_ready_and_unavailable_once_the_lease_is_gone(
    h: &Harness,
) {
    let owner = query_host(h, "east", 1, short_lease()).await;
    let reader = query_host(h, "west", 2, LocationOptions::default()).await;
    let _creating = reserve(&owner, ObjectKind::UserSpot, "room", "game", &owner).await;
    let ready = active_actor(&owner, "user:1").await;

    let spot = reader
        .rt
        .lookup(LookupKind::Spot, &id("room"))
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(spot.state, EntryState::Creating);
    assert_eq!(spot.kind, ObjectKind::UserSpot);
    assert_eq!(spot.stable_type, ty("game"));
    let actor = reader
        .rt
        .lookup(LookupKind::Actor, &id("user:1"))
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(actor.state, EntryState::Ready);
    assert_eq!(actor.object_generation, ready.object_generation());
    assert_eq!(actor.mesh, owner.desc.mesh_name);
    assert_eq!(actor.routing_id, owner.desc.routing_id);
    assert_eq!(actor.stable_type, ty("chat"));

    // The owner stops renewing: past the TTL its lease row is gone.
    h.advance_store_time(Duration::from_millis(1_500)).await;
    let gone = reader
        .rt
        .lookup(LookupKind::Actor, &id("user:1"))
        .await
        .expect("lookup")
        .expect("the record outlives the lease");
    assert_eq!(gone.state, EntryState::Unavailable);
    assert_eq!(gone.object_generation, actor.object_generation);
    let spot = reader
        .rt
        .lookup(LookupKind::Spot, &id("room"))
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(spot.state, EntryState::Creating);
}

/// 2,500 actors over two meshes and two stable types, listed 1,000 per page: every id exactly
/// once per cycle, also with a stable-type and a MeshName filter; other kinds never appear.
pub(super) async fn list_pages_return_each_id_exactly_once_per_cycle(h: &Harness) {
    let hosts = vec![
        Arc::new(query_host(h, "east", 1, LocationOptions::default()).await),
        Arc::new(query_host(h, "west", 2, LocationOptions::default()).await),
    ];
    let mut objects = Vec::new();
    for i in 0..2_500usize {
        let stable_type = if i % 3 == 0 { "mail" } else { "chat" };
        objects.push((
            ObjectKind::Actor,
            format!("actor-{i:05}"),
            stable_type,
            i % 2,
            i % 5 == 0,
        ));
    }
    objects.push((ObjectKind::UserSpot, "actor-00001".into(), "game", 0, true));
    create(&hosts, &objects).await;
    let actors = |keep: &dyn Fn(&Object) -> bool| -> Set<String> {
        objects
            .iter()
            .filter(|o| o.0 == ObjectKind::Actor && keep(o))
            .map(|o| o.1.clone())
            .collect()
    };
    let rt = &hosts[0].rt;

    let all = cycle(rt, &ListFilter::new(ObjectKind::Actor), 1000).await;
    assert_eq!(ids(&all), actors(&|_| true));
    let ready = all.iter().filter(|e| e.state == EntryState::Ready).count();
    assert_eq!(ready, 500, "every committed actor of a live owner is Ready");
    assert!(
        all.iter()
            .all(|e| matches!(e.state, EntryState::Ready | EntryState::Creating))
    );

    let mail = cycle(
        rt,
        &ListFilter::new(ObjectKind::Actor).stable_type(ty("mail")),
        1000,
    )
    .await;
    assert_eq!(ids(&mail), actors(&|o| o.2 == "mail"));
    assert!(mail.iter().all(|e| e.stable_type == ty("mail")));

    let west = MeshName::new("west").expect("mesh");
    let on_west = cycle(
        rt,
        &ListFilter::new(ObjectKind::Actor).mesh(west.clone()),
        1000,
    )
    .await;
    assert_eq!(ids(&on_west), actors(&|o| o.3 == 1));
    assert!(on_west.iter().all(|e| e.mesh == west));

    let spots = cycle(rt, &ListFilter::new(ObjectKind::UserSpot), 1000).await;
    assert_eq!(ids(&spots), Set::from(["actor-00001".to_owned()]));
}

/// Page size 0 and 1,001 are refused before any Store request, and so are malformed tokens
/// and a token of another list; 1 and 1,000 are served.
pub(super) async fn page_size_out_of_range_is_refused_before_any_store_request(h: &Harness) {
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let a = h
        .host_with(faulty.clone(), LocationOptions::default(), None, 1)
        .await;
    let _x = active_actor(&a, "x").await;
    let calls = || {
        [LocationOp::Read, LocationOp::Write, LocationOp::Scan]
            .map(|op| faulty.calls(op))
            .iter()
            .sum::<u64>()
    };
    let filter = ListFilter::new(ObjectKind::Actor);
    let before = calls();
    for size in [0, 1001] {
        match a.rt.list(filter.clone(), size, None).await {
            Err(LocationError::InvalidOperation(InvalidOperation::PageSizeOutOfRange(s))) => {
                assert_eq!(s, size)
            }
            other => panic!("page size {size}: {other:?}"),
        }
    }
    assert_eq!(calls(), before, "a refused page size reached the Store");

    for size in [1, 1000] {
        let page = a.rt.list(filter.clone(), size, None).await.expect("page");
        assert_eq!(ids(&page.entries), Set::from(["x".to_owned()]));
    }
    // Tokens: malformed bytes never become a token; a token of another filter is refused.
    for bad in [&b""[..], b"zlq1", b"zlq1\x07\0\0\0\0\0\x01c", b"garbage"] {
        assert!(matches!(
            PageToken::from_bytes(bad),
            Err(LocationError::InvalidOperation(
                InvalidOperation::MalformedPageToken
            ))
        ));
    }
    for i in 0..3 {
        let _ = active_actor(&a, &format!("y{i}")).await;
    }
    let first = a.rt.list(filter.clone(), 1, None).await.expect("page");
    let token = first.next.expect("more pages");
    let kept = PageToken::from_bytes(token.as_bytes()).expect("an issued token reads back");
    let before = calls();
    let other = ListFilter::new(ObjectKind::Actor).stable_type(ty("chat"));
    assert!(matches!(
        a.rt.list(other, 1, Some(&kept)).await,
        Err(LocationError::InvalidOperation(
            InvalidOperation::PageTokenForAnotherList
        ))
    ));
    assert_eq!(calls(), before, "a foreign token reached the Store");
}

/// A Store failure during a cycle fails that page (scan or record read), with no entries; a
/// lookup failure is an error, never "missing". After recovery the same token goes on and the
/// cycle returns every id once.
pub(super) async fn store_failure_mid_cycle_fails_the_page_with_no_entries(h: &Harness) {
    let faulty = Arc::new(FaultyLocationStore::new(h.store.clone()));
    let a = h
        .host_with(faulty.clone(), LocationOptions::default(), None, 1)
        .await;
    let hosts = [Arc::new(a)];
    let objects: Vec<_> = (0..30)
        .map(|i| (ObjectKind::Actor, format!("o{i:02}"), "chat", 0, i % 2 == 0))
        .collect();
    create(&hosts, &objects).await;
    let rt = &hosts[0].rt;
    let filter = ListFilter::new(ObjectKind::Actor);
    let first = rt.list(filter.clone(), 10, None).await.expect("page 1");
    assert_eq!(first.entries.len(), 10);
    let token = first.next.clone().expect("more");

    for op in [LocationOp::Scan, LocationOp::Read] {
        faulty.set_fault([op], Fault::UNAVAILABLE);
        let failed = rt.list(filter.clone(), 10, Some(&token)).await;
        assert_eq!(
            failed.as_ref().map_err(LocationError::kind).err(),
            Some(ErrorKind::Store),
            "{op:?}: {failed:?}"
        );
        faulty.heal();
    }
    faulty.set_fault([LocationOp::Read], Fault::UNAVAILABLE);
    let lookup = rt.lookup(LookupKind::Actor, &id("o00")).await;
    assert_eq!(lookup.map_err(|e| e.kind()).err(), Some(ErrorKind::Store));
    faulty.heal();

    let mut all = first.entries;
    let mut next = Some(token);
    for _ in 0..MAX_PAGES {
        let Some(t) = next.take() else { break };
        let page = rt.list(filter.clone(), 10, Some(&t)).await.expect("page");
        all.extend(page.entries);
        next = page.next;
    }
    assert!(next.is_none(), "the cycle ended");
    let want: Set<String> = objects.iter().map(|o| o.1.clone()).collect();
    assert_eq!(ids(&all), want);
    assert_eq!(all.len(), want.len(), "no id twice");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// For random sets of ids (some committed, some on another mesh) and page sizes, the
    /// concatenated pages of one cycle are exactly the set, with each id once.
    #[test]
    fn proptest_pages_concatenate_to_the_set(
        set in proptest::collection::btree_map("[a-z0-9:]{1,12}", (any::<bool>(), any::<bool>()), 0..80),
        page_size in 1u32..=25,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let h = Harness::memory();
            let hosts = vec![
                Arc::new(query_host(&h, "east", 1, LocationOptions::default()).await),
                Arc::new(query_host(&h, "west", 2, LocationOptions::default()).await),
            ];
            let objects: Vec<_> = set
                .iter()
                .map(|(object, (west, commit))| {
                    (ObjectKind::Actor, object.clone(), "chat", usize::from(*west), *commit)
                })
                .collect();
            create(&hosts, &objects).await;
            let all = cycle(&hosts[0].rt, &ListFilter::new(ObjectKind::Actor), page_size).await;
            let want: BTreeMap<String, bool> =
                set.iter().map(|(k, (_, c))| (k.clone(), *c)).collect();
            let got: BTreeMap<String, bool> = all
                .iter()
                .map(|e| (e.id.as_str().to_owned(), e.state == EntryState::Ready))
                .collect();
            assert_eq!(got, want);
            assert_eq!(all.len(), set.len());
        });
    }
}

/// With entries near their largest (names of escaped control characters), a page of 1,000
/// would pass 4 MiB: the page stops where the next entry would cross the bound, and that
/// entry starts the next page. Memory store only (about 5 MB of records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_page_ends_before_the_entry_that_would_cross_4_mib() {
    let h = Harness::memory();
    let wide = "\u{1}".repeat(250);
    let mut desc = descriptor(&"\u{1}".repeat(255), &[0xff; 255]);
    desc.object_capabilities
        .push(capability(ObjectKind::Actor, &wide, 0));
    let host = Arc::new(Host {
        rt: h.runtime().await,
        desc,
    });
    let objects: Vec<_> = (0..1000)
        .map(|i| (ObjectKind::Actor, format!("{wide}{i:05}"), i))
        .collect();
    for chunk in objects.chunks(256) {
        let mut tasks = Vec::new();
        for (kind, object, _) in chunk.iter().cloned() {
            let host = host.clone();
            let stable_type = "\u{1}".repeat(250);
            tasks.push(tokio::spawn(async move {
                host.rt
                    .authority()
                    .reserve(ReserveRequest {
                        kind,
                        id: id(&object),
                        stable_type: ty(&stable_type),
                        target: host.target(),
                        payload: Vec::new(),
                        pending_creation: None,
                        creation: None,
                    })
                    .await
                    .expect("reserve")
                    .applied()
                    .expect("applied");
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
    }
    let filter = ListFilter::new(ObjectKind::Actor);
    let first = host
        .rt
        .list(filter.clone(), 1000, None)
        .await
        .expect("page");
    let token = first.next.clone().expect("a second page");
    let size = |entries: &[LocationEntry]| -> usize {
        entries
            .iter()
            .map(|e| e.to_json().expect("json").len())
            .sum::<usize>()
            + PageToken::MAX_LEN
    };
    assert!(first.entries.len() < 1000);
    assert!(size(&first.entries) <= 4 * 1024 * 1024);
    let second = host
        .rt
        .list(filter.clone(), 1000, Some(&token))
        .await
        .expect("page");
    let crossing = second.entries.first().expect("the entry that would cross");
    assert!(
        size(&first.entries) + crossing.to_json().expect("json").len() > 4 * 1024 * 1024,
        "the page ended early although the next entry fit"
    );
    let mut all = first.entries;
    all.extend(second.entries);
    assert_eq!(second.next, None);
    assert_eq!(
        ids(&all),
        objects.iter().map(|o| o.1.clone()).collect::<Set<_>>()
    );
    assert_eq!(all.len(), 1000);
}

/// A [`LocationReader`](crate::LocationReader) holds no lease: building it and reading through
/// it write nothing, and it sees what a runtime sees (Ready under a live owner, the list).
pub(super) async fn a_reader_looks_up_and_lists_without_writing_the_store(h: &Harness) {
    let a = query_host(h, "main", 1, LocationOptions::default()).await;
    let present = active_actor(&a, "present").await;
    let before = h.snapshot().await;
    let reader =
        crate::LocationReader::new(h.store.clone(), &LocationOptions::default()).expect("reader");
    let entry = reader
        .lookup(LookupKind::Actor, &id("present"))
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(entry.state, EntryState::Ready);
    assert_eq!(entry.object_generation, present.object_generation());
    assert_eq!(
        reader
            .lookup(LookupKind::Actor, &id("nobody"))
            .await
            .expect("lookup"),
        None
    );
    let page = reader
        .list(ListFilter::new(ObjectKind::Actor), 10, None)
        .await
        .expect("list");
    assert_eq!(ids(&page.entries), Set::from(["present".to_owned()]));
    assert_eq!(h.snapshot().await, before, "a reader changed the Store");
}
