//! The crate's one error type.

use std::fmt;

/// What went wrong, coarse enough to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CodecErrorKind {
    /// The input (bytes, a field value or an argument) breaks the format or one of its bounds.
    InvalidInput,
    /// A record carries a `recordVersion` (or a format tag) this implementation does not know.
    UnsupportedVersion,
    /// A counter is exhausted (it stores 2^63−1, or a block would pass 2^63−2).
    GenerationExhausted,
    /// A payload codec registration is invalid (a startup configuration error).
    Configuration,
    /// A received payload names a content type the registry does not hold verbatim.
    Protocol,
    /// A payload codec failed to convert a value to or from bytes.
    Payload,
}

/// Why an `inline-v1` creation content reference was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InlineRefRejection {
    /// The text does not start with `inline-v1:`.
    MissingPrefix,
    /// The text carries a further `:` segment (for example the removed CRC32C segment).
    ExtraSegment,
    /// A character outside `A-Z a-z 0-9 - _` (this includes `=` padding).
    InvalidCharacter,
    /// The base64url body has an impossible length or non-zero trailing bits.
    NonCanonicalBase64,
    /// The decoded bytes do not have the record's `requestEncodedSize`.
    SizeMismatch,
    /// The decoded bytes do not have the record's `requestSha256`.
    Sha256Mismatch,
    /// The decoded request is larger than 1,048,576 bytes.
    TooLarge,
}

impl fmt::Display for InlineRefRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::MissingPrefix => "the reference does not start with `inline-v1:`",
            Self::ExtraSegment => {
                "the reference carries an extra `:` segment (a removed checksum-bearing form)"
            }
            Self::InvalidCharacter => "a character outside the base64url alphabet (or `=` padding)",
            Self::NonCanonicalBase64 => "the base64url body is not canonical",
            Self::SizeMismatch => "the decoded bytes do not have the record's requestEncodedSize",
            Self::Sha256Mismatch => "the decoded bytes do not have the record's requestSha256",
            Self::TooLarge => "the decoded request is larger than 1,048,576 bytes",
        })
    }
}

/// The error of every fallible operation of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The bytes are not well-formed JSON.
    #[error("malformed JSON at byte {offset}: {reason}")]
    Json {
        /// Byte offset where parsing stopped.
        offset: usize,
        /// What was expected.
        reason: &'static str,
    },
    /// The record carries a `recordVersion` this implementation does not read.
    #[error("unsupported recordVersion {found} (this implementation reads version 1)")]
    UnsupportedRecordVersion {
        /// The version found, as written.
        found: String,
    },
    /// A required field is absent.
    #[error("missing field `{field}`")]
    MissingField {
        /// Path of the field.
        field: String,
    },
    /// A field this record version does not define.
    #[error("unknown field `{field}`")]
    UnknownField {
        /// Path of the field.
        field: String,
    },
    /// The same member name appears twice in one JSON object.
    #[error("duplicate field `{field}`")]
    DuplicateField {
        /// Path of the field.
        field: String,
    },
    /// A field holds a value of the wrong JSON type or outside its range or set.
    #[error("invalid value of `{field}`: {reason}")]
    InvalidField {
        /// Path of the field.
        field: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The top-level and in-descriptor copies of one value differ.
    #[error("`{field}` differs between the record and its descriptor")]
    CopyMismatch {
        /// Name of the duplicated field.
        field: &'static str,
    },
    /// A value is larger than its bound.
    #[error("{what} is {actual} bytes, more than the {max}-byte bound")]
    TooLarge {
        /// What is too large.
        what: &'static str,
        /// Its size in bytes.
        actual: usize,
        /// The bound.
        max: usize,
    },
    /// A list has more entries than its bound.
    #[error("`{field}` has {actual} entries, more than {max}")]
    TooManyEntries {
        /// Path of the list.
        field: String,
        /// Number of entries.
        actual: usize,
        /// The bound.
        max: usize,
    },
    /// An argument (a name, an id, a counter value, a block size...) is outside its domain.
    #[error("invalid {what}: {reason}")]
    InvalidArgument {
        /// What the argument is.
        what: &'static str,
        /// Why it is invalid.
        reason: String,
    },
    /// A counter row is not bare canonical decimal in 1..=2^63−1.
    #[error("counter value is not canonical: {reason}")]
    NonCanonicalCounter {
        /// Why it is rejected.
        reason: &'static str,
    },
    /// The counter stores 2^63−1 (or the requested block would pass 2^63−2): nothing was issued.
    #[error("generation counter exhausted")]
    GenerationExhausted,
    /// An `inline-v1` creation content reference was rejected.
    #[error("inline-v1 reference rejected: {0}")]
    InlineReference(InlineRefRejection),
    /// A binary envelope (creation-operation-terminal-v1) is malformed.
    #[error("malformed {format}: {reason}")]
    Envelope {
        /// The format name.
        format: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A binary envelope carries a format tag this implementation does not read.
    #[error("unsupported {format} tag 0x{tag:02x}")]
    UnsupportedFormatTag {
        /// The format name.
        format: &'static str,
        /// The tag found.
        tag: u8,
    },
    /// A payload codec registration is invalid.
    #[error("codec configuration error: {reason}")]
    Configuration {
        /// What is wrong.
        reason: String,
    },
    /// The wire content type is not a registry key (compared verbatim).
    #[error("protocol error: content type {content_type:?} is not registered")]
    UnknownContentType {
        /// The content type as received.
        content_type: String,
    },
    /// A payload codec failed.
    #[error("{codec} codec failed: {source}")]
    Payload {
        /// The content type of the codec.
        codec: String,
        /// The codec's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

impl CodecError {
    /// The coarse kind of this error.
    pub fn kind(&self) -> CodecErrorKind {
        match self {
            Self::UnsupportedRecordVersion { .. } | Self::UnsupportedFormatTag { .. } => {
                CodecErrorKind::UnsupportedVersion
            }
            Self::GenerationExhausted => CodecErrorKind::GenerationExhausted,
            Self::Configuration { .. } => CodecErrorKind::Configuration,
            Self::UnknownContentType { .. } => CodecErrorKind::Protocol,
            Self::Payload { .. } => CodecErrorKind::Payload,
            _ => CodecErrorKind::InvalidInput,
        }
    }

    pub(crate) fn invalid_field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid_argument(what: &'static str, reason: impl Into<String>) -> Self {
        Self::InvalidArgument {
            what,
            reason: reason.into(),
        }
    }
}
