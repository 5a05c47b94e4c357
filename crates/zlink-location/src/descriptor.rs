//! Descriptor publishing (spec 21 §4, §3.4): MeshNode, ClientServer server and fanout
//! publisher descriptors under a host-issued Revision.
//!
//! - Revisions are non-zero and increasing per descriptor, issued by this host (never a
//!   Store-wide counter). If the next one would pass `2^63-1` the publisher enters the Error
//!   state and publishes nothing more ([`LocationError::RevisionExhausted`]).
//! - A RENEW carrying the Revision already stored (or an older one) is a harmless no-op reported
//!   as [`PublishOutcome::Stale`]: it never errors and never overwrites, however often it is
//!   replayed.
//! - The whole descriptor is checked when the publisher is built (at startup): over 1 MiB or
//!   with a list over 1,024 entries, the publisher is not built and nothing is published (no
//!   truncated or split descriptor, ever).
//! - Every publish passes the admission gate and carries this host's lease version, the
//!   descriptor's expected version and the mesh/channel change number in one batch. A key held
//!   by another host is taken over only once that host's lease row is gone (its lease is
//!   checked `Missing` in the same batch).

use std::sync::Arc;

use zlink_codec::records::{
    ClientServerDescriptor, Descriptor, DescriptorRecord, FanoutPublisherDescriptor,
    MeshNodeDescriptor,
};
use zlink_codec::{CodecError, Generation};
use zlink_store_spi::{
    Condition, DynLocationStore, LocationStore, Mutation, ReadResult, StoreKey, StoreVersion,
    WriteRequest, WriteResult,
};

use super::admission::{AdmissionGate, AdmissionOp};
use super::error::{InvalidOperation, LocationError, RecordName, put_version};
use super::generation::OwnerLeaseGeneration;
use super::identity::HostRun;
use super::keys;
use super::lease::{LeaseBook, LeaseSeen, lease_key};
use super::options::ConfigError;

/// How many times a publish re-reads after a conflict (a concurrent renew of our own lease, a
/// concurrent publish in the same mesh) before giving up.
const PUBLISH_ATTEMPTS: usize = 32;

mod sealed {
    pub trait Sealed {}
    impl Sealed for zlink_codec::records::MeshNodeDescriptor {}
    impl Sealed for zlink_codec::records::ClientServerDescriptor {}
    impl Sealed for zlink_codec::records::FanoutPublisherDescriptor {}
}

/// A descriptor kind this runtime publishes (sealed: the three spec descriptors).
pub trait PublishableDescriptor: sealed::Sealed + Descriptor + Send + Sync + 'static {
    /// Encodes a record of this descriptor.
    fn encode_record(record: &DescriptorRecord<Self>) -> Result<Vec<u8>, CodecError>;
    /// Decodes a record of this descriptor.
    fn decode_record(bytes: &[u8]) -> Result<DescriptorRecord<Self>, CodecError>;
    /// The runtime-private change-number row of this descriptor's list (its mesh or channel).
    fn change_key(&self) -> Result<StoreKey, LocationError>;
}

impl PublishableDescriptor for MeshNodeDescriptor {
    fn encode_record(record: &DescriptorRecord<Self>) -> Result<Vec<u8>, CodecError> {
        record.encode()
    }
    fn decode_record(bytes: &[u8]) -> Result<DescriptorRecord<Self>, CodecError> {
        DescriptorRecord::<Self>::decode(bytes)
    }
    fn change_key(&self) -> Result<StoreKey, LocationError> {
        Ok(keys::PrivateKey::MeshChange(&self.mesh_name).store_key()?)
    }
}

impl PublishableDescriptor for ClientServerDescriptor {
    fn encode_record(record: &DescriptorRecord<Self>) -> Result<Vec<u8>, CodecError> {
        record.encode()
    }
    fn decode_record(bytes: &[u8]) -> Result<DescriptorRecord<Self>, CodecError> {
        DescriptorRecord::<Self>::decode(bytes)
    }
    fn change_key(&self) -> Result<StoreKey, LocationError> {
        Ok(keys::PrivateKey::ClientServerChange(&self.channel_name).store_key()?)
    }
}

impl PublishableDescriptor for FanoutPublisherDescriptor {
    fn encode_record(record: &DescriptorRecord<Self>) -> Result<Vec<u8>, CodecError> {
        record.encode()
    }
    fn decode_record(bytes: &[u8]) -> Result<DescriptorRecord<Self>, CodecError> {
        DescriptorRecord::<Self>::decode(bytes)
    }
    fn change_key(&self) -> Result<StoreKey, LocationError> {
        Ok(keys::PrivateKey::FanoutPublisherChange(&self.channel_name).store_key()?)
    }
}

/// The result of a publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// Stored under this revision.
    Published {
        /// The revision stored.
        revision: Generation,
        /// The row's new version.
        version: StoreVersion,
    },
    /// The Store already holds this host run's descriptor at this revision or a later one:
    /// nothing was written.
    Stale {
        /// The revision the Store holds.
        stored_revision: Generation,
    },
}

#[derive(Debug)]
struct PubState<D> {
    descriptor: D,
    /// The last revision issued (0 before the first publish).
    revision: u64,
    error: bool,
}

/// Publishes one descriptor of this host.
#[derive(Debug)]
pub struct DescriptorPublisher<D: PublishableDescriptor> {
    store: Arc<dyn DynLocationStore>,
    gate: Arc<AdmissionGate>,
    book: Arc<LeaseBook>,
    key: StoreKey,
    change_key: StoreKey,
    state: tokio::sync::Mutex<PubState<D>>,
}

/// Checks a descriptor against every bound (1 MiB, 1,024 list entries, field ranges) as the
/// largest record it can ever be published in (the longest revision and generation).
pub(crate) fn validate_descriptor<D: PublishableDescriptor>(
    descriptor: &D,
    run: &HostRun,
) -> Result<(), ConfigError> {
    let record = DescriptorRecord {
        owner_id: run.owner_id.clone(),
        lease_generation: Generation::MAX,
        descriptor_revision: Generation::MAX,
        descriptor: descriptor.clone(),
    };
    D::encode_record(&record)
        .map(|_| ())
        .map_err(|e| ConfigError::Descriptor(e.into()))
}

impl<D: PublishableDescriptor> DescriptorPublisher<D> {
    /// Builds a publisher after checking the descriptor against every bound (1 MiB, 1,024 list
    /// entries, field ranges) as the largest record it can ever be published in.
    pub fn new(
        store: Arc<dyn DynLocationStore>,
        gate: Arc<AdmissionGate>,
        book: Arc<LeaseBook>,
        run: &HostRun,
        descriptor: D,
    ) -> Result<Self, LocationError> {
        validate_descriptor(&descriptor, run)?;
        Ok(DescriptorPublisher {
            store,
            gate,
            book,
            key: keys::store_key(&descriptor.key())?,
            change_key: descriptor.change_key()?,
            state: tokio::sync::Mutex::new(PubState {
                descriptor,
                revision: 0,
                error: false,
            }),
        })
    }

    /// The Store key this publisher writes.
    pub fn store_key(&self) -> &StoreKey {
        &self.key
    }

    /// Sets the last issued revision (tests of the overflow rule).
    #[cfg(test)]
    pub(crate) async fn set_last_revision(&self, revision: u64) {
        self.state.lock().await.revision = revision;
    }

    /// Whether the publisher is in the Error state.
    pub async fn is_error(&self) -> bool {
        self.state.lock().await.error
    }

    /// The last revision issued, if any.
    pub async fn revision(&self) -> Option<Generation> {
        Generation::new(self.state.lock().await.revision).ok()
    }

    /// Publishes `descriptor` under the next revision.
    pub async fn publish(&self, descriptor: D) -> Result<PublishOutcome, LocationError> {
        let mut state = self.state.lock().await;
        if state.error {
            return Err(LocationError::RevisionExhausted);
        }
        let Ok(revision) = Generation::new(state.revision.saturating_add(1)) else {
            state.error = true;
            tracing::error!("descriptor revision exhausted: publisher enters the Error state");
            return Err(LocationError::RevisionExhausted);
        };
        let run = self.gate.admit(AdmissionOp::DescriptorPublish)?.run;
        validate_descriptor(&descriptor, &run)?;
        let outcome = self.write_at(&run, revision, &descriptor).await?;
        state.revision = revision.get();
        state.descriptor = descriptor;
        Ok(outcome)
    }

    /// Publishes the current descriptor again under the next revision.
    pub async fn republish(&self) -> Result<PublishOutcome, LocationError> {
        let descriptor = self.state.lock().await.descriptor.clone();
        self.publish(descriptor).await
    }

    /// A RENEW at an explicit revision (for example a replay): if the Store already holds this
    /// host run's descriptor at `revision` or later it is `Stale` and nothing is written.
    pub async fn publish_at(
        &self,
        revision: Generation,
        descriptor: D,
    ) -> Result<PublishOutcome, LocationError> {
        let _state = self.state.lock().await;
        let run = self.gate.admit(AdmissionOp::DescriptorPublish)?.run;
        validate_descriptor(&descriptor, &run)?;
        self.write_at(&run, revision, &descriptor).await
    }

    async fn write_at(
        &self,
        run: &HostRun,
        revision: Generation,
        descriptor: &D,
    ) -> Result<PublishOutcome, LocationError> {
        let record = DescriptorRecord {
            owner_id: run.owner_id.clone(),
            lease_generation: run.lease_generation.to_codec(),
            descriptor_revision: revision,
            descriptor: descriptor.clone(),
        };
        let bytes = D::encode_record(&record).map_err(|e| ConfigError::Descriptor(e.into()))?;
        let own_lease = lease_key(&run.owner_id)?;
        for _ in 0..PUBLISH_ATTEMPTS {
            // Re-checked on every attempt: a stalled host never publishes past its deadline.
            self.gate.admit_for(AdmissionOp::DescriptorPublish, run)?;
            let mut conditions = Vec::new();
            match self.store.read(&self.key).await? {
                ReadResult::Missing { .. } => conditions.push(Condition::Missing(self.key.clone())),
                ReadResult::Found {
                    bytes: stored,
                    version,
                    ..
                } => {
                    conditions.push(Condition::Version(self.key.clone(), version));
                    match D::decode_record(&stored) {
                        Ok(current) if current.owner_id == run.owner_id => {
                            if current.lease_generation == run.lease_generation.to_codec()
                                && current.descriptor_revision >= revision
                            {
                                return Ok(PublishOutcome::Stale {
                                    stored_revision: current.descriptor_revision,
                                });
                            }
                        }
                        Ok(current) => {
                            // Another host's descriptor: taken over only once its lease row is
                            // gone, checked in the same batch.
                            let other = lease_key(&current.owner_id)?;
                            let read = self.store.read(&other).await?;
                            let holder = OwnerLeaseGeneration::new(current.lease_generation.get())
                                .map(|g| HostRun {
                                    owner_id: current.owner_id.clone(),
                                    lease_generation: g,
                                });
                            let seen = LeaseSeen::from_read(&read);
                            if holder.is_some_and(|h| seen.held_by(&h)) {
                                return Err(InvalidOperation::DescriptorHeldByLiveHost.into());
                            }
                            if seen.version.is_some() {
                                // The row exists for another generation of that owner: it is
                                // still someone's lease; do not take over.
                                return Err(InvalidOperation::DescriptorHeldByLiveHost.into());
                            }
                            conditions.push(Condition::Missing(other));
                        }
                        Err(e) => {
                            return Err(LocationError::decode(RecordName::Descriptor)(e));
                        }
                    }
                }
            }
            let lease_version = self
                .book
                .version(&own_lease)
                .ok_or(LocationError::LeaseLost)?;
            conditions.push(Condition::Version(own_lease.clone(), lease_version));
            let (change_condition, change_next) = self.change_row().await?;
            conditions.push(change_condition);
            let request = WriteRequest::new(
                conditions,
                vec![
                    Mutation::put(self.key.clone(), bytes.clone()),
                    Mutation::put(self.change_key.clone(), change_next.to_string()),
                ],
            )?;
            match self.store.write(&request).await? {
                WriteResult::Applied { put_versions, .. } => {
                    let version = put_version(&put_versions, 0)?;
                    return Ok(PublishOutcome::Published { revision, version });
                }
                WriteResult::Conflict { .. } => {
                    // Our lease may have been renewed: refresh its version, then re-read all.
                    let read = self.store.read(&own_lease).await?;
                    let seen = LeaseSeen::from_read(&read);
                    if !seen.held_by(run) {
                        return Err(LocationError::LeaseLost);
                    }
                    self.book.set(own_lease.clone(), seen);
                }
            }
        }
        Err(LocationError::Contended)
    }

    async fn change_row(&self) -> Result<(Condition, u64), LocationError> {
        change_row(self.store.as_ref(), &self.change_key).await
    }

    /// Removes the descriptor (host shutdown), under its current version and only if it is
    /// still this host's, moving the change number in the same batch.
    pub async fn withdraw(&self, run: &HostRun) -> Result<bool, LocationError> {
        let _state = self.state.lock().await;
        for _ in 0..PUBLISH_ATTEMPTS {
            let ReadResult::Found { bytes, version, .. } = self.store.read(&self.key).await? else {
                return Ok(false);
            };
            match D::decode_record(&bytes) {
                Ok(r) if r.owner_id == run.owner_id => {}
                _ => return Ok(false),
            }
            let (change_condition, change_next) = self.change_row().await?;
            let request = WriteRequest::new(
                vec![
                    Condition::Version(self.key.clone(), version),
                    change_condition,
                ],
                vec![
                    Mutation::Delete(self.key.clone()),
                    Mutation::put(self.change_key.clone(), change_next.to_string()),
                ],
            )?;
            if self.store.write(&request).await?.is_applied() {
                return Ok(true);
            }
        }
        Err(LocationError::Contended)
    }
}

/// Reads a change-number row: the condition that it is unchanged, and the next number.
pub(crate) async fn change_row(
    store: &dyn DynLocationStore,
    key: &StoreKey,
) -> Result<(Condition, u64), LocationError> {
    match store.read(key).await? {
        ReadResult::Missing { .. } => Ok((Condition::Missing(key.clone()), 1)),
        ReadResult::Found { bytes, version, .. } => {
            let n = zlink_codec::counter::parse(&bytes)
                .map_err(|_| LocationError::corrupt(RecordName::ChangeNumber))?
                .get();
            // The number only identifies a change; it wraps to 1 rather than stop publishing.
            let next = if n >= zlink_codec::counter::MAX_ISSUED {
                1
            } else {
                n + 1
            };
            Ok((Condition::Version(key.clone(), version), next))
        }
    }
}
