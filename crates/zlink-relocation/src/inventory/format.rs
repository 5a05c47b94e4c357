//! The byte format of inventory pages, the root and the content checksum (format version 1,
//! documented in the crate README, "Relocation target inventory"). Pure functions: no I/O.

use std::fmt;

use bytes::Bytes;
use sha2::{Digest, Sha256};

use crate::inventory::entry::{
    InventoryEntry, MAX_TEXT_LEN, MemberChange, MemberKind, ObjectGeneration, ObjectId, StableType,
};
use crate::inventory::error::InventoryError;

/// The most records (entries, or child references) one page holds (21 §1.2).
pub const MAX_PAGE_ENTRIES: usize = 1024;
/// The largest encoded page: 1 MiB, which is also one Location Store value (22 §3).
pub const MAX_PAGE_BYTES: usize = zlink_store_spi::MAX_VALUE_LEN;
/// The page header: magic `ZLIP`, version, level, record count (u16).
pub const PAGE_HEADER_LEN: usize = 8;
/// The fixed part of an entry record: kind, change, generation (u64), the two length bytes.
pub const ENTRY_FIXED_LEN: usize = 12;
/// The largest entry record: a 255-byte id and a 255-byte stable type.
pub const MAX_ENTRY_RECORD_LEN: usize = ENTRY_FIXED_LEN + 2 * MAX_TEXT_LEN;
/// An index record: digest (32), entries (u64), leaf pages (u64), encoded length (u32).
pub const INDEX_RECORD_LEN: usize = 32 + 8 + 8 + 4;
/// The largest leaf page the format can produce: 1,024 largest entries (534,536 bytes, well
/// under [`MAX_PAGE_BYTES`]).
pub const MAX_LEAF_PAGE_BYTES: usize = PAGE_HEADER_LEN + MAX_PAGE_ENTRIES * MAX_ENTRY_RECORD_LEN;
// The id and stable-type bounds keep 1,024 largest entries under 1 MiB: the entry bound is
// always the one that splits at the spec limits, and any single entry fits an empty page.
const _: () = assert!(MAX_LEAF_PAGE_BYTES <= MAX_PAGE_BYTES);
/// The encoded root: magic `ZLIR`, version, height, three counts, checksum, start reference.
pub const ROOT_LEN: usize = 4 + 1 + 1 + 8 + 8 + 8 + 32 + 32 + 4;
/// The deepest tree: even with the smallest fan-out (2 children per index page), 64 levels
/// reach more leaf pages than any u64 entry count needs. With the spec limits a tree is at most
/// 7 levels high.
pub const MAX_HEIGHT: u8 = 64;
/// The inventory page and root format version this crate writes and reads.
pub const FORMAT_VERSION: u8 = 1;

const PAGE_MAGIC: [u8; 4] = *b"ZLIP";
const ROOT_MAGIC: [u8; 4] = *b"ZLIR";
const CONTENT_DOMAIN: &[u8] = b"zlink-relocation/target-list/v1\0";
const PAGE: &str = "page";
const ROOT: &str = "root";

fn hex32(bytes: &[u8; 32], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

/// The SHA-256 of one encoded page: its checksum and its content address. A caller derives the
/// page's store key from it (plus its own aggregate and relocation identity).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageDigest([u8; 32]);

/// The accessors, hex `Display` and `Debug` every 32-byte SHA-256 value here shares.
macro_rules! sha256_value {
    ($name:ident, $wrap_doc:literal) => {
        impl $name {
            #[doc = $wrap_doc]
            pub fn from_bytes(bytes: [u8; 32]) -> Self {
                Self(bytes)
            }

            /// The raw bytes.
            pub fn as_bytes(&self) -> &[u8; 32] {
                &self.0
            }

            /// Lowercase hex (64 characters).
            pub fn to_hex(&self) -> String {
                self.to_string()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                hex32(&self.0, f)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "("))?;
                hex32(&self.0, f)?;
                write!(f, ")")
            }
        }
    };
}

impl PageDigest {
    /// The digest of some bytes.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }
}

sha256_value!(PageDigest, "Wraps raw digest bytes.");

/// The target-list content checksum: SHA-256 over the ordered entries (see
/// [`target_list_checksum`](crate::inventory::target_list_checksum)). Recorded at Preparing and
/// Captured, held by the root, re-checked by the final SpotWide CAS and by the target.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TargetListChecksum([u8; 32]);

sha256_value!(
    TargetListChecksum,
    "Wraps raw checksum bytes (as read from a record)."
);

/// Streams entry records into the content checksum:
/// `SHA-256(domain ‖ record… ‖ u64 BE entry count)`.
pub(crate) struct ContentHasher {
    sha: Sha256,
    count: u64,
    scratch: Vec<u8>,
}

impl ContentHasher {
    pub(crate) fn new() -> Self {
        let mut sha = Sha256::new();
        sha.update(CONTENT_DOMAIN);
        Self {
            sha,
            count: 0,
            scratch: Vec::with_capacity(MAX_ENTRY_RECORD_LEN),
        }
    }

    pub(crate) fn push(&mut self, entry: &InventoryEntry) {
        self.scratch.clear();
        put_entry(&mut self.scratch, entry);
        self.sha.update(&self.scratch);
        self.count += 1;
    }

    pub(crate) fn finish(mut self) -> TargetListChecksum {
        self.sha.update(self.count.to_be_bytes());
        TargetListChecksum(self.sha.finalize().into())
    }
}

/// A reference from a parent (an index page, or the root) to one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PageRef {
    pub(crate) digest: PageDigest,
    pub(crate) entries: u64,
    pub(crate) leaf_pages: u64,
    pub(crate) encoded_len: u32,
}

impl PageRef {
    /// The page's SHA-256 (its content address).
    pub fn digest(&self) -> PageDigest {
        self.digest
    }

    /// Entries in the page's subtree (a leaf: its own entries).
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Leaf pages in the page's subtree (a leaf: 1).
    pub fn leaf_pages(&self) -> u64 {
        self.leaf_pages
    }

    /// The page's encoded length in bytes.
    pub fn encoded_len(&self) -> u32 {
        self.encoded_len
    }
}

/// The encoded length of an entry record.
pub(crate) fn entry_record_len(entry: &InventoryEntry) -> usize {
    ENTRY_FIXED_LEN + entry.id().len() + entry.stable_type().len()
}

/// Appends an entry record. Lengths fit one byte: both texts are at most 255 bytes.
pub(crate) fn put_entry(buf: &mut Vec<u8>, entry: &InventoryEntry) {
    buf.push(entry.kind().to_wire());
    buf.push(entry.change().to_wire());
    buf.extend_from_slice(&entry.generation().get().to_be_bytes());
    buf.push(entry.id().len() as u8);
    buf.extend_from_slice(entry.id().as_str().as_bytes());
    buf.push(entry.stable_type().len() as u8);
    buf.extend_from_slice(entry.stable_type().as_str().as_bytes());
}

fn put_header(buf: &mut Vec<u8>, level: u8, count: usize) {
    buf.extend_from_slice(&PAGE_MAGIC);
    buf.push(FORMAT_VERSION);
    buf.push(level);
    buf.extend_from_slice(&(count as u16).to_be_bytes());
}

/// Encodes a leaf page (level 0). The caller keeps the bounds (the builder does; tests craft
/// out-of-bound pages on purpose).
pub(crate) fn encode_leaf<'a>(
    entries: impl ExactSizeIterator<Item = &'a InventoryEntry>,
) -> Vec<u8> {
    let mut buf = Vec::with_capacity(PAGE_HEADER_LEN + entries.len() * MAX_ENTRY_RECORD_LEN / 4);
    put_header(&mut buf, 0, entries.len());
    for entry in entries {
        put_entry(&mut buf, entry);
    }
    buf
}

/// Encodes an index page at `level` (1..=MAX_HEIGHT).
pub(crate) fn encode_index(level: u8, children: &[PageRef]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(PAGE_HEADER_LEN + children.len() * INDEX_RECORD_LEN);
    put_header(&mut buf, level, children.len());
    for child in children {
        buf.extend_from_slice(child.digest.as_bytes());
        buf.extend_from_slice(&child.entries.to_be_bytes());
        buf.extend_from_slice(&child.leaf_pages.to_be_bytes());
        buf.extend_from_slice(&child.encoded_len.to_be_bytes());
    }
    buf
}

/// A decoded page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DecodedPage {
    /// Level 0: entries in page order.
    Leaf(Vec<InventoryEntry>),
    /// Level ≥ 1: child references in order.
    Index { level: u8, children: Vec<PageRef> },
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Self {
            bytes,
            pos: 0,
            what,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], InventoryError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .ok_or(InventoryError::Truncated { what: self.what })?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], InventoryError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u8(&mut self) -> Result<u8, InventoryError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, InventoryError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, InventoryError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, InventoryError> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    fn magic_and_version(&mut self, magic: [u8; 4]) -> Result<(), InventoryError> {
        if self.array::<4>()? != magic {
            return Err(InventoryError::BadMagic { what: self.what });
        }
        match self.u8()? {
            FORMAT_VERSION => Ok(()),
            version => Err(InventoryError::UnsupportedVersion {
                what: self.what,
                version,
            }),
        }
    }

    fn finish(&self) -> Result<(), InventoryError> {
        match self.bytes.len() - self.pos {
            0 => Ok(()),
            count => Err(InventoryError::TrailingBytes {
                what: self.what,
                count,
            }),
        }
    }
}

/// A field error of a decoded entry is malformed data, not caller input.
fn stored(err: InventoryError) -> InventoryError {
    match err {
        InventoryError::InvalidText { field, problem } => {
            InventoryError::StoredTextInvalid { field, problem }
        }
        InventoryError::GenerationOutOfRange { value } => {
            InventoryError::StoredGenerationOutOfRange { value }
        }
        other => other,
    }
}

fn get_entry(r: &mut Reader<'_>) -> Result<InventoryEntry, InventoryError> {
    let kind = MemberKind::from_wire(r.u8()?)?;
    let change = MemberChange::from_wire(r.u8()?)?;
    let generation = ObjectGeneration::new(r.u64()?).map_err(stored)?;
    let id_len = usize::from(r.u8()?);
    let id = ObjectId::from_utf8(r.take(id_len)?).map_err(stored)?;
    let type_len = usize::from(r.u8()?);
    let stable_type = StableType::from_utf8(r.take(type_len)?).map_err(stored)?;
    Ok(InventoryEntry::new(kind, id, generation, stable_type).with_change(change))
}

/// Decodes one page, checking its own bounds (≤ 1 MiB, 1..=1,024 records, level ≤ 64) and
/// every field. Whether it belongs to a tree is the verifier's business.
pub(crate) fn decode_page(bytes: &[u8]) -> Result<DecodedPage, InventoryError> {
    if bytes.len() > MAX_PAGE_BYTES {
        return Err(InventoryError::PageTooLarge {
            len: bytes.len(),
            max: MAX_PAGE_BYTES,
        });
    }
    let mut r = Reader::new(bytes, PAGE);
    r.magic_and_version(PAGE_MAGIC)?;
    let level = r.u8()?;
    if level > MAX_HEIGHT {
        return Err(InventoryError::LevelTooHigh {
            level,
            max: MAX_HEIGHT,
        });
    }
    let count = usize::from(r.u16()?);
    if count == 0 || count > MAX_PAGE_ENTRIES {
        return Err(InventoryError::PageRecordCount {
            count,
            max: MAX_PAGE_ENTRIES,
        });
    }
    let page = if level == 0 {
        let entries = (0..count)
            .map(|_| get_entry(&mut r))
            .collect::<Result<Vec<_>, _>>()?;
        DecodedPage::Leaf(entries)
    } else {
        let children = (0..count)
            .map(|_| {
                Ok(PageRef {
                    digest: PageDigest(r.array()?),
                    entries: r.u64()?,
                    leaf_pages: r.u64()?,
                    encoded_len: r.u32()?,
                })
            })
            .collect::<Result<Vec<_>, InventoryError>>()?;
        DecodedPage::Index { level, children }
    };
    r.finish()?;
    Ok(page)
}

/// The upper-level summary of an inventory: what the Location Store keeps as the list's "start
/// position, total entry count, and content checksum" (21 §1.2), plus the tree shape needed to
/// detect a dropped or added page. About 100 bytes, so it fits any record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InventoryRoot {
    pub(crate) height: u8,
    pub(crate) total_count: u64,
    pub(crate) leaf_page_count: u64,
    pub(crate) index_page_count: u64,
    pub(crate) content_checksum: TargetListChecksum,
    pub(crate) start: PageDigest,
    pub(crate) start_len: u32,
}

impl InventoryRoot {
    /// Total entries (the User Spot plus its Actors).
    pub fn total_count(&self) -> u64 {
        self.total_count
    }

    /// Leaf pages (pages of entries).
    pub fn page_count(&self) -> u64 {
        self.leaf_page_count
    }

    /// Upper-level (index) pages; 0 when the whole list is one page.
    pub fn index_page_count(&self) -> u64 {
        self.index_page_count
    }

    /// The tree height: 0 when the start page is the only (leaf) page.
    pub fn height(&self) -> u8 {
        self.height
    }

    /// The target-list content checksum.
    pub fn content_checksum(&self) -> TargetListChecksum {
        self.content_checksum
    }

    /// The start position: the digest of the top page (the only leaf, or the top index page).
    pub fn start(&self) -> PageDigest {
        self.start
    }

    /// The start page's encoded length.
    pub fn start_len(&self) -> u32 {
        self.start_len
    }

    /// The reference to the start page, as if from a parent.
    pub fn start_ref(&self) -> PageRef {
        PageRef {
            digest: self.start,
            entries: self.total_count,
            leaf_pages: self.leaf_page_count,
            encoded_len: self.start_len,
        }
    }

    /// Checks this inventory against the target-list checksum recorded at Preparing (21 §9.1):
    /// a difference is [`InventoryError::TargetListMismatch`].
    pub fn check_target_list(&self, recorded: &TargetListChecksum) -> Result<(), InventoryError> {
        if self.content_checksum == *recorded {
            Ok(())
        } else {
            Err(InventoryError::TargetListMismatch)
        }
    }

    /// The root's bytes (format version 1, [`ROOT_LEN`] bytes).
    pub fn encode(&self) -> Bytes {
        let mut buf = Vec::with_capacity(ROOT_LEN);
        buf.extend_from_slice(&ROOT_MAGIC);
        buf.push(FORMAT_VERSION);
        buf.push(self.height);
        buf.extend_from_slice(&self.total_count.to_be_bytes());
        buf.extend_from_slice(&self.leaf_page_count.to_be_bytes());
        buf.extend_from_slice(&self.index_page_count.to_be_bytes());
        buf.extend_from_slice(self.content_checksum.as_bytes());
        buf.extend_from_slice(self.start.as_bytes());
        buf.extend_from_slice(&self.start_len.to_be_bytes());
        Bytes::from(buf)
    }

    /// Decodes a root and checks that its fields agree with each other.
    pub fn decode(bytes: &[u8]) -> Result<Self, InventoryError> {
        let mut r = Reader::new(bytes, ROOT);
        r.magic_and_version(ROOT_MAGIC)?;
        let root = Self {
            height: r.u8()?,
            total_count: r.u64()?,
            leaf_page_count: r.u64()?,
            index_page_count: r.u64()?,
            content_checksum: TargetListChecksum(r.array()?),
            start: PageDigest(r.array()?),
            start_len: r.u32()?,
        };
        r.finish()?;
        root.check_shape()?;
        Ok(root)
    }

    /// The cheap self-consistency checks of a root (no page needed).
    pub(crate) fn check_shape(&self) -> Result<(), InventoryError> {
        let bad = InventoryError::RootInconsistent;
        if self.height > MAX_HEIGHT {
            return Err(InventoryError::LevelTooHigh {
                level: self.height,
                max: MAX_HEIGHT,
            });
        }
        if self.total_count == 0 {
            return Err(bad("no entries"));
        }
        if self.leaf_page_count == 0 || self.leaf_page_count > self.total_count {
            return Err(bad("leaf page count outside 1..=total count"));
        }
        let single = self.leaf_page_count == 1 && self.index_page_count == 0;
        if (self.height == 0) != single {
            return Err(bad("height disagrees with the page counts"));
        }
        if self.height > 0 && self.index_page_count < u64::from(self.height) {
            return Err(bad("fewer index pages than levels"));
        }
        let len = self.start_len as usize;
        if !(PAGE_HEADER_LEN + 1..=MAX_PAGE_BYTES).contains(&len) {
            return Err(bad("start page length out of range"));
        }
        Ok(())
    }
}
