//! The chat's objects and what they answer: `User` Actors, `Room` Instance Spots, their
//! messages, and the serde state adapter that moves either one with its state.
//!
//! A user talks to its rooms itself: `Enter` and `Say` go to the user's Actor, whose handler
//! sends `Join` / `Post` on to the room (creating the room by that first message when it does
//! not exist yet).

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use zlink_runtime::config::{ActorType, SpotType};
use zlink_runtime::handler::Handles;
use zlink_runtime::location::RoutingId;
use zlink_runtime::relocate::JsonState;
use zlink_runtime::{Actor, ErrorKind, Message, MessageContext, Request, Spot, ZLinkError};

/// The MeshName every process of the chat joins.
pub(crate) const MESH: &str = "chat";
/// The stable type of the user Actors.
pub(crate) const USER: &str = "user";
/// The stable type of the room Instance Spots.
pub(crate) const ROOM: &str = "room";
/// How many lines a room keeps (the oldest go first).
pub(crate) const HISTORY_LEN: usize = 100;

// ---- state ----------------------------------------------------------------------------------

/// A user: the rooms it joined and how many messages it posted.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct User {
    /// The rooms this user joined.
    pub(crate) rooms: BTreeSet<String>,
    /// How many messages this user posted, in all rooms.
    pub(crate) posted: u64,
}
impl Actor for User {}

/// One line of a room's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Line {
    /// The line's number in its room: 1, 2, … with no gap.
    pub(crate) seq: u64,
    /// Who posted it.
    pub(crate) from: String,
    /// What was said.
    pub(crate) text: String,
}

/// A room: its members and its last [`HISTORY_LEN`] lines.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Room {
    /// Who joined.
    pub(crate) members: BTreeSet<String>,
    /// The last [`HISTORY_LEN`] lines, oldest first.
    pub(crate) lines: VecDeque<Line>,
    /// How many lines were ever posted (the last line's `seq`).
    pub(crate) posted: u64,
}
impl Spot for Room {}

impl Room {
    /// Adds `user` to the members (joining twice changes nothing); returns the member count.
    pub(crate) fn join(&mut self, user: &str) -> usize {
        self.members.insert(user.to_owned());
        self.members.len()
    }

    /// Appends a line, dropping the oldest past [`HISTORY_LEN`]; returns its `seq`.
    pub(crate) fn post(&mut self, from: &str, text: &str) -> u64 {
        self.posted += 1;
        self.lines.push_back(Line {
            seq: self.posted,
            from: from.to_owned(),
            text: text.to_owned(),
        });
        while self.lines.len() > HISTORY_LEN {
            self.lines.pop_front();
        }
        self.posted
    }
}

// ---- messages -------------------------------------------------------------------------------

/// Declares a request: its packet name is the type's name, its reply `$reply`.
macro_rules! request {
    ($name:ident => $reply:ty) => {
        impl Message for $name {
            const PACKET: &'static str = stringify!($name);
        }
        impl Request for $name {
            type Reply = $reply;
        }
    };
}

/// To a user: join `room` (created by this first use if it does not exist). Replies with the
/// room's member count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Enter {
    /// The room's global id.
    pub(crate) room: String,
}
request!(Enter => usize);

/// To a user: post `text` in `room` (which the user must have entered). Replies with the
/// line's `seq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Say {
    /// The room's global id.
    pub(crate) room: String,
    /// What to say.
    pub(crate) text: String,
}
request!(Say => u64);

/// To a user: its whole state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Profile;
request!(Profile => User);

/// To a room: add a member. Replies with the member count.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Join {
    /// The joining user's id.
    pub(crate) user: String,
}
request!(Join => usize);

/// To a room: append a line. Replies with its `seq`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Post {
    /// The posting user's id.
    pub(crate) from: String,
    /// What was said.
    pub(crate) text: String,
}
request!(Post => u64);

/// To a room: its whole state (members and history).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct History;
request!(History => Room);

/// To a user or a room: which process answers for it now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Where;
request!(Where => Place);

/// A routing id as text: an automatic one is `<prefix>-<uuid>` (its `Display` is hex).
pub(crate) fn rid_text(rid: &RoutingId) -> String {
    String::from_utf8_lossy(rid.as_bytes()).into_owned()
}

/// Where an object lives: the node that ran the `Where` handler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Place {
    /// The node's routing id (as text, see [`rid_text`]).
    pub(crate) node: String,
    /// The node's process id.
    pub(crate) pid: u32,
}

impl Place {
    /// The place of the handler `ctx` belongs to.
    fn here(ctx: &MessageContext) -> Place {
        Place {
            node: ctx.routing_id().map(rid_text).unwrap_or_default(),
            pid: std::process::id(),
        }
    }
}

// ---- handlers -------------------------------------------------------------------------------

impl Handles<Enter> for User {
    async fn handle(&mut self, enter: Enter, ctx: MessageContext) -> Result<usize, ZLinkError> {
        // Instance intent: the room is created by this message when it does not exist.
        let rooms = ctx.spots()?;
        let join = Join { user: ctx.id };
        let members = rooms
            .instance(&enter.room)
            .stable_type(ROOM)
            .request(&join)
            .await?;
        self.rooms.insert(enter.room);
        Ok(members)
    }
}

impl Handles<Say> for User {
    async fn handle(&mut self, say: Say, ctx: MessageContext) -> Result<u64, ZLinkError> {
        if !self.rooms.contains(&say.room) {
            let why = format!("{} has not entered {}", ctx.id, say.room);
            return Err(ZLinkError::application(ErrorKind::InvalidOperation, &why));
        }
        let rooms = ctx.spots()?;
        let post = Post {
            from: ctx.id,
            text: say.text,
        };
        let seq = rooms.request(&say.room, &post).await?;
        self.posted += 1;
        Ok(seq)
    }
}

impl Handles<Profile> for User {
    async fn handle(&mut self, _: Profile, _: MessageContext) -> Result<User, ZLinkError> {
        Ok(self.clone())
    }
}

impl Handles<Where> for User {
    async fn handle(&mut self, _: Where, ctx: MessageContext) -> Result<Place, ZLinkError> {
        Ok(Place::here(&ctx))
    }
}

impl Handles<Join> for Room {
    async fn handle(&mut self, join: Join, _: MessageContext) -> Result<usize, ZLinkError> {
        Ok(self.join(&join.user))
    }
}

impl Handles<Post> for Room {
    async fn handle(&mut self, post: Post, _: MessageContext) -> Result<u64, ZLinkError> {
        Ok(self.post(&post.from, &post.text))
    }
}

impl Handles<History> for Room {
    async fn handle(&mut self, _: History, _: MessageContext) -> Result<Room, ZLinkError> {
        Ok(self.clone())
    }
}

impl Handles<Where> for Room {
    async fn handle(&mut self, _: Where, ctx: MessageContext) -> Result<Place, ZLinkError> {
        Ok(Place::here(&ctx))
    }
}

// ---- registration ---------------------------------------------------------------------------

/// The `user` Actor type: created empty, moved with its state.
pub(crate) fn user_type(t: ActorType<User>) -> ActorType<User> {
    t.factory(|_ctx| async { Ok(User::default()) })
        .preserve_state_with(JsonState)
        .handles::<Enter>()
        .handles::<Say>()
        .handles::<Profile>()
        .handles::<Where>()
}

/// The `room` Instance Spot type: created empty by its first message, moved with its state.
pub(crate) fn room_type(t: SpotType<Room>) -> SpotType<Room> {
    t.factory(|_ctx| async { Ok(Room::default()) })
        .preserve_state_with(JsonState)
        .handles::<Join>()
        .handles::<Post>()
        .handles::<History>()
        .handles::<Where>()
}
