//! The fluent creation call of the managers (spec 21 §7, 06 §15): `create` / `get_or_create`
//! return a [`CreateCall`] whose options — the creation request and the deadline — are each
//! set at most once (a second setting makes the call fail with `InvalidOperation` before any
//! Store request). Awaiting the call submits it and yields the ref; [`CreateCall::submit`]
//! yields the whole result (created or existing, and the application reply of the approving
//! callback). A call is consumed by its submission, so it cannot be submitted twice.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use zlink_codec::records::ObjectKind;
use zlink_codec::terminal::ObjectRef;
use zlink_codec::{ObjectId, StableType};

use super::client::{ObjectClient, Obtain};
use super::refs::{ActorRef, SpotRef};
use crate::messaging::{IdRole, InvalidCall, ZLinkError};

/// A ref type a creation call yields (sealed: [`ActorRef`] and [`SpotRef`]).
pub trait CreatedRef: sealed::Sealed + Send + 'static {}

mod sealed {
    pub trait Sealed {
        fn from_terminal(r: &zlink_codec::terminal::ObjectRef) -> Self;
    }
}

impl sealed::Sealed for ActorRef {
    fn from_terminal(r: &ObjectRef) -> Self {
        ActorRef::from_terminal(r)
    }
}
impl CreatedRef for ActorRef {}
impl sealed::Sealed for SpotRef {
    fn from_terminal(r: &ObjectRef) -> Self {
        SpotRef::from_terminal(r)
    }
}
impl CreatedRef for SpotRef {}

/// The result of a submitted creation call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Created<R> {
    /// The Ready incarnation.
    pub object: R,
    /// `true` when this call created it, `false` when it already existed (GetOrCreate).
    pub created: bool,
    /// The application reply of the approving creation callback, if any.
    pub reply: Option<Vec<u8>>,
}

/// One Create / GetOrCreate call; see the module docs.
#[must_use = "a creation call does nothing until it is awaited or submitted"]
pub struct CreateCall<R> {
    client: ObjectClient,
    kind: ObjectKind,
    target: Result<(StableType, ObjectId), ZLinkError>,
    exclusive: bool,
    request: Option<Bytes>,
    deadline: Duration,
    deadline_set: bool,
    spot: Option<SpotRef>,
    twice: Option<&'static str>,
    _ref: PhantomData<fn() -> R>,
}

impl<R> std::fmt::Debug for CreateCall<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateCall")
            .field("kind", &self.kind)
            .field("exclusive", &self.exclusive)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl<R: CreatedRef> CreateCall<R> {
    pub(crate) fn new(
        client: ObjectClient,
        kind: ObjectKind,
        target: Result<(StableType, ObjectId), ZLinkError>,
        exclusive: bool,
        deadline: Duration,
    ) -> Self {
        Self {
            client,
            kind,
            target,
            exclusive,
            request: None,
            deadline,
            deadline_set: false,
            spot: None,
            twice: None,
            _ref: PhantomData,
        }
    }

    /// Attaches a creation request (at most 1 MiB, and the record holding it inline must fit
    /// the 1 MiB record bound): the factory and the creation callback see it. It is stored
    /// inline in the `Creating` record, never in the Relocation Store (spec 21 §7).
    pub fn request(mut self, bytes: impl Into<Bytes>) -> Self {
        if self.request.is_some() {
            self.twice.get_or_insert("request");
        }
        self.request = Some(bytes.into());
        self
    }

    /// The deadline spanning the whole call, from the first read to Ready (default: the
    /// manager's).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        if self.deadline_set {
            self.twice.get_or_insert("deadline");
        }
        self.deadline_set = true;
        self.deadline = deadline;
        self
    }

    /// Submits the call: the Ready ref, whether this call created it, and the callback's reply.
    pub async fn submit(self) -> Result<Created<R>, ZLinkError> {
        if let Some(option) = self.twice {
            return Err(InvalidCall::OptionSetTwice { option }.into());
        }
        if self.deadline.is_zero() {
            return Err(InvalidCall::ZeroDeadline.into());
        }
        let (stable_type, id) = self.target?;
        let done = self
            .client
            .obtain(Obtain {
                kind: self.kind,
                stable_type,
                id,
                request: self.request,
                exclusive: self.exclusive,
                deadline: self.deadline,
                spot: self.spot,
            })
            .await?;
        Ok(Created {
            object: <R as sealed::Sealed>::from_terminal(&done.object),
            created: done.created,
            reply: done.reply,
        })
    }
}

impl CreateCall<ActorRef> {
    /// Creates the Actor into the User Spot `spot` (that incarnation): it is placed on the
    /// Spot's node, becomes its member, and — for a `SpotWide` Spot — runs under the Spot's
    /// turn and resolves its owner through the Spot. Without it the Actor joins the placing
    /// node's Entry Spot. A missing Spot is `NotFound`, another incarnation
    /// `InvalidOperation`, a Spot not Ready `Unavailable`.
    pub fn in_spot(mut self, spot: &SpotRef) -> Self {
        if self.spot.is_some() {
            self.twice.get_or_insert("spot");
        }
        self.spot = Some(spot.clone());
        self
    }
}

impl<R: CreatedRef> IntoFuture for CreateCall<R> {
    type Output = Result<R, ZLinkError>;
    type IntoFuture = Pin<Box<dyn Future<Output = Self::Output> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.submit().await.map(|c| c.object) })
    }
}

/// Parses a stable type and an id (`role`: an Actor or a Spot id) for a call (errors surface
/// when the call is submitted).
pub(crate) fn parse(
    role: IdRole,
    stable_type: &str,
    id: &str,
) -> Result<(StableType, ObjectId), ZLinkError> {
    let st = StableType::new(stable_type).map_err(InvalidCall::invalid_id(IdRole::StableType))?;
    let id = ObjectId::new(id).map_err(InvalidCall::invalid_id(role))?;
    Ok((st, id))
}
