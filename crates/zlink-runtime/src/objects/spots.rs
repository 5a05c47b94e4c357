//! The User Spot manager (spec 21 §7, §7.2; 06 §15, §17, §18): Create (the framework issues the
//! SpotId, a lowercase canonical UUID v4) / GetOrCreate (the caller names the SpotId) placed by
//! weight and capacity and decided by the Spot type's own creation callback, Find, Close, and
//! existing-only messaging by global SpotId (a Missing Spot is `NotFound`; nothing is created by
//! a message here; [`SpotManager::instance`] is the call with Instance intent, which creates a
//! Missing Instance Spot from its first message).

use std::time::Duration;

use zlink_codec::ObjectId;
use zlink_codec::keys::AuthorityKind;
use zlink_codec::records::ObjectKind;

use super::call::{CreateCall, parse};
use super::client::{DEFAULT_CREATE_DEADLINE, ObjectClient};
use super::host::ObjectKey;
use super::instance::InstanceCall;
use super::manager::{request_object, send_object};
use super::refs::SpotRef;
use crate::mesh::node::CallOptions;
use crate::messaging::{IdRole, InvalidCall, Message, Request, ZLinkError};

/// Creates, finds, closes and messages the User Spots of one object mesh (cheap to clone).
#[derive(Clone)]
pub struct SpotManager {
    pub(crate) client: ObjectClient,
    deadline: Duration,
}

impl std::fmt::Debug for SpotManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpotManager")
            .field("mesh", &self.client.objects.mesh)
            .finish_non_exhaustive()
    }
}

/// Whether `id` has the reserved Entry Spot form `<prefix>-entry-<lowercase uuid v4>`
/// (spec 06 §15): such an id is never a User or Instance Spot id.
fn is_entry_spot_id(id: &str) -> bool {
    let Some(at) = id.rfind("-entry-") else {
        return false;
    };
    let tail = &id[at + "-entry-".len()..];
    at > 0
        && tail.len() == 36
        && tail == tail.to_ascii_lowercase()
        && uuid::Uuid::parse_str(tail).is_ok_and(|u| u.get_version_num() == 4)
}

fn key(id: &str) -> Result<ObjectKey, ZLinkError> {
    let id = ObjectId::new(id).map_err(InvalidCall::invalid_id(IdRole::SpotId))?;
    Ok((AuthorityKind::Spot, id))
}

/// A user-named Spot id: not of the reserved Entry Spot form.
pub(crate) fn user_spot_id(id: &ObjectId) -> Result<(), InvalidCall> {
    if is_entry_spot_id(id.as_str()) {
        return Err(InvalidCall::ReservedSpotId { id: id.clone() });
    }
    Ok(())
}

impl SpotManager {
    pub(crate) fn new(client: ObjectClient) -> Self {
        Self {
            client,
            deadline: DEFAULT_CREATE_DEADLINE,
        }
    }

    /// The same manager with another default creation deadline.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The current Ready Spot `id` (User or Instance), or `None`.
    pub async fn find(&self, id: &str) -> Result<Option<SpotRef>, ZLinkError> {
        let (_, id) = key(id)?;
        let read = self.client.read(ObjectKind::UserSpot, &id).await?;
        Ok(match read {
            zlink_location::AuthorityRead::Found { handle, .. }
                if handle.state() == zlink_codec::records::AllocationState::Active =>
            {
                Some(SpotRef::of(&handle))
            }
            _ => None,
        })
    }

    /// Creates a User Spot of `stable_type` under a framework-issued SpotId (a lowercase
    /// canonical UUID v4), placed by weight and capacity and decided by the type's creation
    /// callback.
    pub fn create(&self, stable_type: &str) -> CreateCall<SpotRef> {
        let id = zlink_store_spi::entropy::uuid_v4().to_string();
        CreateCall::new(
            self.client.clone(),
            ObjectKind::UserSpot,
            parse(IdRole::SpotId, stable_type, &id),
            true,
            self.deadline,
        )
    }

    /// The User Spot `id` of `stable_type`: the existing Ready one, the result of a creation in
    /// progress, or a new one (the same result table as the Actor manager; an Instance Spot or
    /// another type under the id is `TypeMismatch`; the reserved Entry Spot form is
    /// `InvalidOperation`).
    pub fn get_or_create(&self, stable_type: &str, id: &str) -> CreateCall<SpotRef> {
        let target = parse(IdRole::SpotId, stable_type, id)
            .and_then(|t| user_spot_id(&t.1).map(|()| t).map_err(ZLinkError::from));
        CreateCall::new(
            self.client.clone(),
            ObjectKind::UserSpot,
            target,
            false,
            self.deadline,
        )
    }

    /// Closes exactly the incarnation `spot` names (spec 21 §7.2): `Ok(false)` when no record
    /// exists, `InvalidOperation` when another incarnation exists, `Unavailable` when its owner
    /// cannot be reached or it is not Ready.
    pub async fn close(&self, spot: &SpotRef) -> Result<bool, ZLinkError> {
        let key = (AuthorityKind::Spot, spot.id.clone());
        self.client
            .end(ObjectKind::UserSpot, &key, spot.generation, self.deadline)
            .await
    }

    /// Sends `request` to the Ready Spot `id` and waits for its typed reply: Missing →
    /// NotFound (nothing is created), owner route not ready → Unavailable.
    ///
    /// The error of a request answered on this node is the handler's (or a filter's, or the
    /// runtime's) own [`ZLinkError`], with its typed source; from another node it is
    /// [`ZLinkError::Remote`] with the same kind and only the sanitised message (the cause stays
    /// on the node that failed).
    ///
    /// A local call error the handler failed with (`InvalidOperation`, `NotConfigured`: an
    /// invalid argument or state of a call the handler made) is not the caller's (spec 06
    /// §20): a caller on either node gets `InternalFailure`, here
    /// [`ZLinkError::HandlerFailed`] with the handler's error as its source, as for a
    /// node-direct request. The runtime's own refusals (Missing → NotFound, ...) are as listed.
    pub async fn request<R: Request>(&self, id: &str, request: &R) -> Result<R::Reply, ZLinkError> {
        self.request_with(id, request, &CallOptions::default())
            .await
    }

    /// [`request`](Self::request) with call options.
    pub async fn request_with<R: Request>(
        &self,
        id: &str,
        request: &R,
        options: &CallOptions,
    ) -> Result<R::Reply, ZLinkError> {
        let key = key(id)?;
        request_object(&self.client, &key, request, options).await
    }

    /// Sends `message` one-way to the Ready Spot `id` (completes once admitted).
    pub async fn send<M: Message>(&self, id: &str, message: &M) -> Result<(), ZLinkError> {
        send_object(&self.client, &key(id)?, message).await
    }

    /// A Spot direct call with Instance intent (spec 06 §15, §16, §18; 21 §7.1): its
    /// [`request`](InstanceCall::request) / [`send`](InstanceCall::send) reaches the Ready
    /// Instance Spot `id`, or creates it from that first message when no record exists (cold
    /// activation). Options: [`stable_type`](InstanceCall::stable_type) (default: the only
    /// Instance Spot type served in the mesh), [`deadline`](InstanceCall::deadline) (default:
    /// this manager's), [`metadata`](InstanceCall::metadata).
    ///
    /// ```no_run
    /// # async fn f(spots: zlink_runtime::SpotManager) -> Result<(), zlink_runtime::ZLinkError> {
    /// # #[derive(serde::Serialize, serde::Deserialize)] struct Join;
    /// # impl zlink_runtime::Message for Join { const PACKET: &'static str = "Join"; }
    /// # impl zlink_runtime::Request for Join { type Reply = u32; }
    /// let members = spots.instance("room-1").stable_type("room").request(&Join).await?;
    /// # Ok(()) }
    /// ```
    pub fn instance(&self, id: &str) -> InstanceCall {
        InstanceCall::new(self.client.clone(), id, self.deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reserved_entry_form_is_an_entry_spot_id() {
        let u = zlink_store_spi::entropy::uuid_v4().to_string();
        assert!(is_entry_spot_id(&format!("lobby-entry-{u}")));
        assert!(!is_entry_spot_id(&format!("-entry-{u}")), "needs a prefix");
        assert!(!is_entry_spot_id(&format!(
            "lobby-entry-{}",
            u.to_uppercase()
        )));
        assert!(!is_entry_spot_id("lobby-entry-not-a-uuid"));
        assert!(!is_entry_spot_id("room-7"));
    }
}
