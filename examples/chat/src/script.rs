//! The demo's scripted conversation, played by a client root: users enter rooms and post,
//! while the client keeps its own copy of what every room and user must hold afterwards —
//! built with the same `Room::join` / `Room::post` the objects run — to check the real ones
//! against, before and after a node leaves.

use std::collections::BTreeMap;

use zlink_runtime::{ActorManager, SpotManager, ZLinkError, ZLinkHost};

use crate::model::{Enter, History, Place, Profile, Room, Say, USER, User, Where};

/// Who enters which room (a room is created by its first `Enter`).
const ENTERS: [(&str, &str); 8] = [
    ("ada", "rust"),
    ("bob", "rust"),
    ("cyd", "rust"),
    ("ada", "redis"),
    ("dee", "redis"),
    ("bob", "random"),
    ("cyd", "random"),
    ("dee", "random"),
];

/// Who says what, where.
const SAYS: [(&str, &str, &str); 7] = [
    ("ada", "rust", "has anyone tried zlink-rs?"),
    (
        "bob",
        "rust",
        "users are Actors here, rooms are Instance Spots",
    ),
    (
        "cyd",
        "rust",
        "and a room moves with its history when its node leaves",
    ),
    ("ada", "redis", "the Location Store only says who owns what"),
    ("dee", "redis", "the state itself travels node to node"),
    ("cyd", "random", "bob, please don't"),
    ("bob", "random", "counting to 110, bear with me"),
];

/// Then `bob` counts in `random` to this: the room keeps only the last `HISTORY_LEN` lines.
const COUNT_TO: u64 = 110;

/// What every room and user must hold: the client's own copy.
#[derive(Debug, Default)]
pub(crate) struct Expected {
    /// Each room by id.
    pub(crate) rooms: BTreeMap<String, Room>,
    /// Each user by id.
    pub(crate) users: BTreeMap<String, User>,
}

/// The client's view of the chat: its Actor and Spot managers.
pub(crate) struct Chat {
    actors: ActorManager,
    spots: SpotManager,
}

/// A failed call as the demo reports it.
fn failed(what: &str) -> impl FnOnce(ZLinkError) -> String + '_ {
    move |e| format!("{what}: {e} ({})", e.kind())
}

impl Chat {
    /// The chat as `host` (a root of the chat mesh) sees it.
    pub(crate) fn new(host: &ZLinkHost) -> Result<Chat, String> {
        Ok(Chat {
            actors: host.actors().map_err(failed("actors"))?,
            spots: host.spots().map_err(failed("spots"))?,
        })
    }

    /// Plays the conversation; returns what every room and user must now hold. Each reply is
    /// checked as it comes (member counts, line numbers).
    pub(crate) async fn converse(&self) -> Result<Expected, String> {
        let mut want = Expected::default();
        for (user, room) in ENTERS {
            if !want.users.contains_key(user) {
                self.actors
                    .get_or_create(USER, user)
                    .await
                    .map_err(failed(&format!("create user {user}")))?;
                want.users.insert(user.to_owned(), User::default());
            }
            let members = self
                .actors
                .actor::<User>(user)
                .request(&Enter { room: room.into() })
                .await
                .map_err(failed(&format!("{user} enters {room}")))?;
            let expected = want.rooms.entry(room.to_owned()).or_default().join(user);
            want.users
                .entry(user.to_owned())
                .or_default()
                .rooms
                .insert(room.to_owned());
            if members != expected {
                return Err(format!(
                    "{user} entered {room}: {members} members, expected {expected}"
                ));
            }
        }
        let counting = (1..=COUNT_TO).map(|n| ("bob", "random", n.to_string()));
        let says = SAYS.iter().map(|&(u, r, t)| (u, r, t.to_owned()));
        for (user, room, text) in says.chain(counting) {
            self.say(&mut want, user, room, &text).await?;
        }
        Ok(want)
    }

    /// `user` says `text` in `room`; the line's number must be the expected one.
    async fn say(
        &self,
        want: &mut Expected,
        user: &str,
        room: &str,
        text: &str,
    ) -> Result<(), String> {
        let say = Say {
            room: room.into(),
            text: text.into(),
        };
        let seq = self
            .actors
            .actor::<User>(user)
            .request(&say)
            .await
            .map_err(failed(&format!("{user} says {text:?} in {room}")))?;
        let expected = want
            .rooms
            .entry(room.to_owned())
            .or_default()
            .post(user, text);
        want.users.entry(user.to_owned()).or_default().posted += 1;
        if seq != expected {
            return Err(format!(
                "{user} in {room}: line {seq}, expected line {expected}"
            ));
        }
        Ok(())
    }

    /// Every room as the room itself answers.
    pub(crate) async fn rooms(&self, want: &Expected) -> Result<BTreeMap<String, Room>, String> {
        let mut rooms = BTreeMap::new();
        for id in want.rooms.keys() {
            let room = self
                .spots
                .request(id, &History)
                .await
                .map_err(failed(&format!("history of {id}")))?;
            rooms.insert(id.clone(), room);
        }
        Ok(rooms)
    }

    /// Fails unless every room and every user holds exactly what `want` says (`when` names
    /// the moment in the message).
    pub(crate) async fn check(&self, want: &Expected, when: &str) -> Result<(), String> {
        for (id, got) in self.rooms(want).await? {
            if let Some(problem) = want.rooms.get(&id).and_then(|w| difference(&got, w)) {
                return Err(format!("room {id} {when}: {problem}"));
            }
        }
        for (id, w) in &want.users {
            let got = self
                .actors
                .actor::<User>(id.as_str())
                .request(&Profile)
                .await
                .map_err(failed(&format!("profile of {id}")))?;
            if &got != w {
                return Err(format!(
                    "user {id} {when}: posted {} in {:?}, expected {} in {:?}",
                    got.posted, got.rooms, w.posted, w.rooms
                ));
            }
        }
        Ok(())
    }

    /// Where every user and room lives now, by label (`user ada`, `room rust`).
    pub(crate) async fn places(&self, want: &Expected) -> Result<BTreeMap<String, Place>, String> {
        let mut places = BTreeMap::new();
        for id in want.users.keys() {
            let place = self.actors.actor::<User>(id.as_str()).request(&Where).await;
            places.insert(
                format!("user {id}"),
                place.map_err(failed(&format!("where is {id}")))?,
            );
        }
        for id in want.rooms.keys() {
            let place = self.spots.request(id, &Where).await;
            places.insert(
                format!("room {id}"),
                place.map_err(failed(&format!("where is {id}")))?,
            );
        }
        Ok(places)
    }
}

/// What differs between a room as it answered and as expected, if anything.
fn difference(got: &Room, want: &Room) -> Option<String> {
    if got == want {
        return None;
    }
    if got.members != want.members {
        return Some(format!(
            "members {:?}, expected {:?}",
            got.members, want.members
        ));
    }
    if got.posted != want.posted || got.lines.len() != want.lines.len() {
        return Some(format!(
            "{} lines posted, {} kept; expected {} posted, {} kept",
            got.posted,
            got.lines.len(),
            want.posted,
            want.lines.len()
        ));
    }
    let (g, w) = got.lines.iter().zip(&want.lines).find(|(g, w)| g != w)?;
    Some(format!("line {g:?}, expected {w:?}"))
}
