//! The payload codec registry (spec 06 §12).
//!
//! JSON (serde_json) is the default: an application using only JSON registers nothing.
//! MessagePack (rmp-serde, maps with field names) and custom codecs are registered on a
//! [`RegistryBuilder`]; [`RegistryBuilder::build`] validates every registration at startup.
//!
//! - **Content types** are canonicalized once at registration: leading/trailing SP and TAB
//!   removed, ASCII type and subtype lowercased. Parameters, inner whitespace, non-ASCII,
//!   empty or non-token characters are a [`CodecError::Configuration`]. A later registration
//!   of the same canonical form replaces the earlier one.
//! - **Send**: selection uses the declared type (the Rust type parameter at the call site),
//!   later registrations take priority, and no match selects JSON. Results are cached for at
//!   most 1,024 declared types; the cache never evicts, and a type first seen past the limit
//!   is re-evaluated on every send.
//! - **Receive**: the wire content type is compared verbatim (byte for byte) with the
//!   registry keys; an unknown or non-canonical value is [`CodecError::UnknownContentType`]
//!   (a protocol error), never reinterpreted as JSON.
//!
//! ```
//! use zlink_codec::payload::{PayloadCodec, Registry, Selector};
//!
//! #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
//! struct Score { points: u32 }
//!
//! let registry = Registry::builder()
//!     .register(PayloadCodec::message_pack(), Selector::exact::<Score>())
//!     .build()?;
//! let sent = registry.encode(&Score { points: 3 })?;
//! assert_eq!(sent.content_type, "application/msgpack");
//! let back: Score = registry.decode(sent.content_type, &sent.bytes)?;
//! assert_eq!(back, Score { points: 3 });
//!
//! // Unregistered declared types use JSON; unknown wire types are protocol errors.
//! assert_eq!(registry.encode(&7u32)?.content_type, "application/json");
//! assert!(registry.decode::<u32>("Application/JSON", b"7").is_err());
//! # Ok::<(), zlink_codec::CodecError>(())
//! ```

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::CodecError;

/// The JSON content type (always registered).
pub const JSON_CONTENT_TYPE: &str = "application/json";

/// The default MessagePack content type.
pub const MESSAGE_PACK_CONTENT_TYPE: &str = "application/msgpack";

/// How many declared types the send-selection cache holds (it never evicts).
pub const SELECTION_CACHE_LIMIT: usize = 1_024;

/// A boxed codec error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Canonicalizes a registered content type: trims SP/TAB, lowercases ASCII; rejects
/// parameters, inner whitespace, non-ASCII, empty tokens and non-token characters.
///
/// ```
/// use zlink_codec::payload::canonical_content_type;
/// assert_eq!(canonical_content_type(" \tApplication/X-Proto\t")?, "application/x-proto");
/// assert!(canonical_content_type("application/json; charset=utf-8").is_err());
/// # Ok::<(), zlink_codec::CodecError>(())
/// ```
pub fn canonical_content_type(raw: &str) -> Result<String, CodecError> {
    let config = |reason: String| CodecError::Configuration { reason };
    let trimmed = raw.trim_matches([' ', '\t']);
    if !trimmed.is_ascii() {
        return Err(config(format!("content type {raw:?} is not ASCII")));
    }
    if trimmed.contains(';') {
        return Err(config(format!("content type {raw:?} has parameters")));
    }
    if trimmed.contains([' ', '\t']) {
        return Err(config(format!("content type {raw:?} has inner whitespace")));
    }
    let Some((ty, sub)) = trimmed.split_once('/') else {
        return Err(config(format!("content type {raw:?} is not type/subtype")));
    };
    for token in [ty, sub] {
        if token.is_empty() {
            return Err(config(format!("content type {raw:?} has an empty token")));
        }
        if !token.bytes().all(is_tchar) {
            return Err(config(format!(
                "content type {raw:?} has a character outside the RFC 9110 token set"
            )));
        }
    }
    Ok(trimmed.to_ascii_lowercase())
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A declared payload type: the type at the call site, not the value's runtime type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeclaredType {
    id: TypeId,
    name: &'static str,
}

impl DeclaredType {
    /// The declared type `T`.
    pub fn of<T: ?Sized + 'static>() -> Self {
        Self {
            id: TypeId::of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }

    /// The type id.
    pub fn type_id(&self) -> TypeId {
        self.id
    }

    /// The type name (diagnostic only; not stable across compilers).
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// A custom codec (Protobuf, ...). It receives the declared type and the value as `&dyn Any`
/// of exactly that type, and returns a boxed value of exactly the requested type on decode.
pub trait CustomCodec: Send + Sync + fmt::Debug + 'static {
    /// Converts a value of the declared type to bytes.
    fn encode(&self, declared: DeclaredType, value: &dyn Any) -> Result<Vec<u8>, BoxError>;
    /// Converts bytes to a value of the declared type.
    fn decode(&self, declared: DeclaredType, bytes: &[u8]) -> Result<Box<dyn Any>, BoxError>;
}

#[derive(Debug, Clone)]
enum Imp {
    Json,
    MessagePack,
    Custom(Arc<dyn CustomCodec>),
}

/// A payload codec and its content type.
#[derive(Debug, Clone)]
pub struct PayloadCodec {
    content_type: String,
    imp: Imp,
}

impl PayloadCodec {
    /// The JSON codec (`application/json`).
    pub fn json() -> Self {
        Self {
            content_type: JSON_CONTENT_TYPE.to_owned(),
            imp: Imp::Json,
        }
    }

    /// The MessagePack codec (`application/msgpack`; structs as maps with field names).
    pub fn message_pack() -> Self {
        Self {
            content_type: MESSAGE_PACK_CONTENT_TYPE.to_owned(),
            imp: Imp::MessagePack,
        }
    }

    /// A custom codec under a content type (validated by [`RegistryBuilder::build`]).
    pub fn custom(content_type: impl Into<String>, codec: Arc<dyn CustomCodec>) -> Self {
        Self {
            content_type: content_type.into(),
            imp: Imp::Custom(codec),
        }
    }

    /// The same codec under another content type.
    pub fn with_content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = content_type.into();
        self
    }

    /// The content type as given (canonicalized at build).
    pub fn content_type(&self) -> &str {
        &self.content_type
    }

    fn encode<T: Serialize + 'static>(&self, value: &T) -> Result<Vec<u8>, BoxError> {
        match &self.imp {
            Imp::Json => Ok(serde_json::to_vec(value)?),
            Imp::MessagePack => Ok(rmp_serde::to_vec_named(value)?),
            Imp::Custom(c) => c.encode(DeclaredType::of::<T>(), value),
        }
    }

    fn decode<T: DeserializeOwned + 'static>(&self, bytes: &[u8]) -> Result<T, BoxError> {
        match &self.imp {
            Imp::Json => Ok(serde_json::from_slice(bytes)?),
            Imp::MessagePack => Ok(rmp_serde::from_slice(bytes)?),
            Imp::Custom(c) => c
                .decode(DeclaredType::of::<T>(), bytes)?
                .downcast::<T>()
                .map(|b| *b)
                .map_err(|_| "the custom codec returned a value of another type".into()),
        }
    }
}

/// Which declared types a registration applies to.
#[derive(Clone)]
pub struct Selector(SelectorImp);

#[derive(Clone)]
enum SelectorImp {
    Exact(TypeId),
    Any,
    Predicate(Arc<dyn Fn(&DeclaredType) -> bool + Send + Sync>),
}

impl Selector {
    /// Exactly the declared type `T`.
    pub fn exact<T: ?Sized + 'static>() -> Self {
        Self(SelectorImp::Exact(TypeId::of::<T>()))
    }

    /// Every declared type.
    pub fn any() -> Self {
        Self(SelectorImp::Any)
    }

    /// The declared types a predicate accepts.
    pub fn predicate(f: impl Fn(&DeclaredType) -> bool + Send + Sync + 'static) -> Self {
        Self(SelectorImp::Predicate(Arc::new(f)))
    }

    /// Only receive-side: the codec decodes its content type but is never selected on send.
    pub fn none() -> Self {
        Self::predicate(|_| false)
    }

    fn matches(&self, d: &DeclaredType) -> bool {
        match &self.0 {
            SelectorImp::Exact(id) => *id == d.id,
            SelectorImp::Any => true,
            SelectorImp::Predicate(f) => f(d),
        }
    }
}

impl fmt::Debug for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            SelectorImp::Exact(id) => write!(f, "Selector::Exact({id:?})"),
            SelectorImp::Any => f.write_str("Selector::Any"),
            SelectorImp::Predicate(_) => f.write_str("Selector::Predicate"),
        }
    }
}

/// Collects registrations; [`build`](Self::build) validates them (startup).
#[derive(Debug, Default)]
pub struct RegistryBuilder {
    entries: Vec<(PayloadCodec, Selector)>,
}

impl RegistryBuilder {
    /// Registers a codec for the declared types the selector accepts. A later registration
    /// takes priority on send, and replaces an earlier one of the same canonical content type.
    pub fn register(mut self, codec: PayloadCodec, selector: Selector) -> Self {
        self.entries.push((codec, selector));
        self
    }

    /// Validates and canonicalizes every registration.
    pub fn build(self) -> Result<Registry, CodecError> {
        let mut checked = Vec::with_capacity(self.entries.len());
        for (codec, selector) in self.entries {
            let content_type = canonical_content_type(&codec.content_type)?;
            checked.push(Registration {
                content_type,
                codec,
                selector,
            });
        }
        Ok(Registry::assemble(checked))
    }
}

#[derive(Debug)]
struct Registration {
    content_type: String,
    codec: PayloadCodec,
    selector: Selector,
}

/// Bytes a codec produced and the canonical content type to put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded<'a> {
    /// The canonical content type.
    pub content_type: &'a str,
    /// The payload bytes.
    pub bytes: Vec<u8>,
}

/// An immutable codec registry (cheap to clone; the selection cache is shared).
#[derive(Debug, Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    regs: Vec<Registration>,
    by_content_type: HashMap<String, usize>,
    /// The registration under `application/json` (the default unless replaced).
    json: Option<usize>,
    /// Declared type -> selected registration (`None`: the built-in JSON fallback).
    cache: RwLock<HashMap<TypeId, Option<usize>, BuildHasherDefault<TypeIdHasher>>>,
}

/// Hashes a [`TypeId`] by its own bits (a TypeId is already a hash of its type; SipHash on
/// top of it cost more than the rest of a send's codec selection). Keys are the program's
/// own types, never received data.
#[derive(Default)]
struct TypeIdHasher(u64);

impl std::hash::Hasher for TypeIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

static BUILTIN_JSON: std::sync::LazyLock<PayloadCodec> =
    std::sync::LazyLock::new(PayloadCodec::json);

impl Default for Registry {
    fn default() -> Self {
        Self::json_only()
    }
}

impl Registry {
    /// A builder.
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    /// The registry with only the default JSON codec.
    pub fn json_only() -> Self {
        Self::assemble(Vec::new())
    }

    /// Builds the tables from validated registrations, in registration order.
    fn assemble(checked: Vec<Registration>) -> Self {
        // The default JSON codec comes first, so any registration can replace it.
        let mut regs: Vec<Registration> = vec![Registration {
            content_type: JSON_CONTENT_TYPE.to_owned(),
            codec: PayloadCodec::json(),
            selector: Selector::none(),
        }];
        for r in checked {
            regs.retain(|old| old.content_type != r.content_type);
            regs.push(r);
        }
        let by_content_type = regs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.content_type.clone(), i))
            .collect();
        let json = regs
            .iter()
            .position(|r| r.content_type == JSON_CONTENT_TYPE);
        Self {
            inner: Arc::new(Inner {
                regs,
                by_content_type,
                json,
                cache: RwLock::new(HashMap::default()),
            }),
        }
    }

    /// The canonical content types the receive side accepts.
    pub fn content_types(&self) -> impl Iterator<Item = &str> {
        self.inner.regs.iter().map(|r| r.content_type.as_str())
    }

    /// Number of declared types whose selection is cached (at most 1,024).
    pub fn cached_selections(&self) -> usize {
        self.inner.cache.read().len()
    }

    fn evaluate(&self, d: &DeclaredType) -> Option<usize> {
        self.inner
            .regs
            .iter()
            .rposition(|r| r.selector.matches(d))
            .or(self.inner.json)
    }

    fn select_index(&self, d: &DeclaredType) -> Option<usize> {
        if let Some(hit) = self.inner.cache.read().get(&d.id) {
            return *hit;
        }
        let selected = self.evaluate(d);
        let mut cache = self.inner.cache.write();
        if cache.len() < SELECTION_CACHE_LIMIT {
            cache.insert(d.id, selected);
        }
        selected
    }

    fn codec_at(&self, i: Option<usize>) -> (&str, &PayloadCodec) {
        match i.and_then(|i| self.inner.regs.get(i)) {
            Some(r) => (&r.content_type, &r.codec),
            None => (JSON_CONTENT_TYPE, &BUILTIN_JSON),
        }
    }

    /// The content type selected for the declared type `T`.
    pub fn select<T: ?Sized + 'static>(&self) -> &str {
        self.codec_at(self.select_index(&DeclaredType::of::<T>())).0
    }

    /// Encodes a value with the codec selected for its declared type `T`.
    pub fn encode<T: Serialize + 'static>(&self, value: &T) -> Result<Encoded<'_>, CodecError> {
        let (content_type, codec) = self.codec_at(self.select_index(&DeclaredType::of::<T>()));
        let bytes = codec.encode(value).map_err(|source| CodecError::Payload {
            codec: content_type.to_owned(),
            source,
        })?;
        Ok(Encoded {
            content_type,
            bytes,
        })
    }

    /// Decodes received bytes; the wire content type must equal a registry key verbatim.
    pub fn decode<T: DeserializeOwned + 'static>(
        &self,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<T, CodecError> {
        // The JSON registration first: the usual content type, without hashing it.
        let json = self
            .inner
            .json
            .and_then(|i| self.inner.regs.get(i))
            .filter(|r| r.content_type == content_type);
        let reg = json
            .or_else(|| {
                self.inner
                    .by_content_type
                    .get(content_type)
                    .and_then(|i| self.inner.regs.get(*i))
            })
            .ok_or_else(|| CodecError::UnknownContentType {
                content_type: content_type.to_owned(),
            })?;
        reg.codec
            .decode(bytes)
            .map_err(|source| CodecError::Payload {
                codec: reg.content_type.clone(),
                source,
            })
    }
}
