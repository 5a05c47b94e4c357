//! Members of a `SpotWide` User Spot in the sweeps and the at-access recovery (spec 21 §8.2,
//! §11; issue 20 item 5). A member resolves its owner through its Spot's record: the aggregate
//! NewOwner moves the Spot and, through it, every member, and returns every member's capacity
//! on the source, while the member records still name the source run until each follows the
//! Spot's new owner (a write of its own, after the CAS). A member record whose follow has not
//! applied is therefore no row of the run it names: deleting it would end an incarnation that
//! lives on the Spot's new owner and take its capacity off the source a second time.
//!
//! Which Spot a record resolves through is in the record's framework-internal payload, opaque
//! here, so the runtime supplies it ([`MemberResolver`], set on the builder). With one set,
//! the owner sweeps and [`AuthorityClient::recover_object`] read the Spot's record of every
//! member record they would delete: a Spot owned by another run (or on another node) keeps
//! the member (counted as [`SweepReport::moved_members`](super::SweepReport::moved_members);
//! `Conflict::ResolvesThroughSpot` at access), and otherwise the member's delete is
//! conditioned on the Spot's record as read (its version, or its absence), so a Spot that
//! moves meanwhile keeps it too. A sweep that finds such a member while its own run owns the
//! Spot — the Spot's new owner sweeping the dead source run — repairs the member's record: it
//! follows the Spot's owner ([`AuthorityClient::follow_spot_owner`], counted as
//! [`SweepReport::members_followed`](super::SweepReport::members_followed)), the write the
//! move's own follow never got applied. A sweep deletes such members before it deletes any Spot row,
//! so the Spot's own delete never breaks their condition. A Spot record that cannot be read or
//! decoded keeps the member (never guessed).

use std::fmt;
use std::sync::Arc;

use zlink_codec::records::ObjectKind;
use zlink_store_spi::entropy::HashMap;
use zlink_store_spi::{LocationStore, ReadResult, StoreError, StoreKey};

use super::super::engine::Expect;
use super::super::error::LocationError;
use super::super::identity::ObjectId;
use super::super::keys;
use super::AuthorityClient;
use super::handle::AuthorityHandle;

/// The `SpotWide` User Spot an authority record resolves its owner through, if any (see the
/// module docs): the runtime reads it from the record's framework-internal payload.
#[derive(Clone)]
pub struct MemberResolver(Arc<ResolveFn>);

/// The function a [`MemberResolver`] calls.
type ResolveFn = dyn Fn(&AuthorityHandle) -> Option<ObjectId> + Send + Sync;

impl MemberResolver {
    /// A resolver calling `through` for each record a sweep or a recovery would delete.
    pub fn new(
        through: impl Fn(&AuthorityHandle) -> Option<ObjectId> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(through))
    }
}

impl MemberResolver {
    /// The `SpotWide` User Spot `record` resolves its owner through, if any.
    pub(crate) fn resolve(&self, record: &AuthorityHandle) -> Option<ObjectId> {
        (self.0)(record)
    }
}

impl fmt::Debug for MemberResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MemberResolver")
    }
}

/// What a member record's Spot says about deleting it.
#[derive(Debug)]
pub(super) enum MemberCheck {
    /// Not a member of a `SpotWide` Spot (or no resolver is set): as any record.
    NotAMember,
    /// Its Spot is owned by another run or on another node (its record as read): the member
    /// moved with it, keep it.
    Moved(Box<AuthorityHandle>),
    /// Its Spot's record could not be read or decoded: keep it.
    Unreadable,
    /// Its Spot is this record's run's too, or gone: delete it under this guard on the Spot's
    /// record (unchanged since read).
    Guard((StoreKey, Expect)),
}

/// A Spot's record as a member check read it.
#[derive(Debug, Clone)]
pub(super) enum SpotSeen {
    Missing(StoreKey),
    Found(StoreKey, Box<AuthorityHandle>),
    Unreadable,
}

/// The Spot reads of one sweep, by Spot id (its members share them).
pub(super) type SpotReads = HashMap<ObjectId, SpotSeen>;

impl AuthorityClient {
    /// What the Spot the record `member` resolves through says about deleting it (see the
    /// module docs), its Spot read once per `reads`. A Store failure other than an unreadable
    /// key is returned.
    pub(super) async fn member_check(
        &self,
        member: &AuthorityHandle,
        reads: &mut SpotReads,
    ) -> Result<MemberCheck, LocationError> {
        let Some(resolver) = &self.members else {
            return Ok(MemberCheck::NotAMember);
        };
        if member.kind() != ObjectKind::Actor {
            return Ok(MemberCheck::NotAMember);
        }
        let Some(spot) = (resolver.0)(member) else {
            return Ok(MemberCheck::NotAMember);
        };
        let seen = match reads.get(&spot) {
            Some(seen) => seen.clone(),
            None => {
                let seen = self.read_spot(&spot).await?;
                reads.insert(spot, seen.clone());
                seen
            }
        };
        Ok(match seen {
            SpotSeen::Missing(key) => MemberCheck::Guard((key, Expect::Missing)),
            SpotSeen::Unreadable => MemberCheck::Unreadable,
            SpotSeen::Found(key, handle) => {
                if handle.owner() != member.owner() || handle.node() != member.node() {
                    MemberCheck::Moved(handle)
                } else {
                    MemberCheck::Guard((key, Expect::Version(handle.version().clone())))
                }
            }
        })
    }

    async fn read_spot(&self, spot: &ObjectId) -> Result<SpotSeen, LocationError> {
        let key = keys::authority(ObjectKind::UserSpot, spot)?;
        let read = match self.store.read(&key).await {
            Ok(read) => read,
            Err(StoreError::Unreadable(_)) => return Ok(SpotSeen::Unreadable),
            Err(e) => return Err(e.into()),
        };
        Ok(match read {
            ReadResult::Missing { .. } => SpotSeen::Missing(key),
            ReadResult::Found { bytes, version, .. } => {
                match AuthorityHandle::decode(spot.clone(), &bytes, version) {
                    Ok(handle) => SpotSeen::Found(key, Box::new(handle)),
                    Err(_) => SpotSeen::Unreadable,
                }
            }
        })
    }
}
