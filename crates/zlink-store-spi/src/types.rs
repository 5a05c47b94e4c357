//! Validated value types shared by both SPIs.

use std::borrow::Borrow;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Argument, ArgumentError};

fn check_len(what: Argument, actual: usize, min: usize, max: usize) -> Result<(), ArgumentError> {
    if actual < min || actual > max {
        Err(ArgumentError::Length {
            what,
            actual,
            min,
            max,
        })
    } else {
        Ok(())
    }
}

macro_rules! bounded_string {
    (
        $(#[$meta:meta])*
        $name:ident, $arg:expr, $min:expr, $max:expr
    ) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Smallest allowed length in bytes.
            pub const MIN_LEN: usize = $min;
            /// Largest allowed length in bytes.
            pub const MAX_LEN: usize = $max;

            /// Validates and wraps a string (length in UTF-8 bytes).
            pub fn new(value: impl Into<String>) -> Result<Self, ArgumentError> {
                let value = value.into();
                check_len($arg, value.len(), Self::MIN_LEN, Self::MAX_LEN)?;
                Ok(Self(value))
            }

            /// Validates bytes as UTF-8 and wraps them.
            pub fn from_utf8(bytes: &[u8]) -> Result<Self, ArgumentError> {
                let s = std::str::from_utf8(bytes).map_err(|_| ArgumentError::NotUtf8 { what: $arg })?;
                Self::new(s)
            }

            /// The text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The UTF-8 bytes; comparison and ordering are byte-wise.
            pub fn as_bytes(&self) -> &[u8] {
                self.0.as_bytes()
            }

            /// Length in bytes.
            pub fn len(&self) -> usize {
                self.0.len()
            }

            /// Whether the value is empty (only possible where the minimum length is 0).
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }

            /// Unwraps the text.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = ArgumentError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = ArgumentError;
            fn try_from(value: &str) -> Result<Self, Self::Error> {
                Self::new(value)
            }
        }

        impl std::str::FromStr for $name {
            type Err = ArgumentError;
            fn from_str(value: &str) -> Result<Self, Self::Err> {
                Self::new(value)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }
    };
}

bounded_string!(
    /// A Location Store key: opaque UTF-8, 1..=1024 bytes, compared byte-for-byte
    /// (no normalisation, no case folding).
    ///
    /// ```
    /// use zlink_store_spi::StoreKey;
    /// assert!(StoreKey::new("authority/a").is_ok());
    /// assert!(StoreKey::new("").is_err());
    /// assert!(StoreKey::new("k".repeat(1025)).is_err());
    /// // "A" and "a" are different keys.
    /// assert_ne!(StoreKey::new("A").unwrap(), StoreKey::new("a").unwrap());
    /// ```
    StoreKey, Argument::Key, 1, 1024
);

bounded_string!(
    /// A provider-issued version: opaque UTF-8, 1..=4096 bytes. The framework never interprets it.
    ///
    /// ```
    /// use zlink_store_spi::StoreVersion;
    /// assert!(StoreVersion::new("17").is_ok());
    /// assert!(StoreVersion::new("").is_err());
    /// ```
    StoreVersion, Argument::Version, 1, 4096
);

bounded_string!(
    /// A scan prefix: UTF-8, 0..=1024 bytes, compared byte-for-byte like a key.
    ///
    /// ```
    /// use zlink_store_spi::ScanPrefix;
    /// assert!(ScanPrefix::new("").is_ok());
    /// assert!(ScanPrefix::new("p".repeat(1025)).is_err());
    /// ```
    ScanPrefix, Argument::ScanPrefix, 0, 1024
);

bounded_string!(
    /// An opaque scan cursor: UTF-8, 1..=4096 bytes. Only the provider that issued it knows
    /// what it means.
    ///
    /// ```
    /// use zlink_store_spi::ScanCursor;
    /// assert!(ScanCursor::new("c".repeat(4096)).is_ok());
    /// assert!(ScanCursor::new("c".repeat(4097)).is_err());
    /// ```
    ScanCursor, Argument::Cursor, 1, 4096
);

bounded_string!(
    /// A framework-issued Relocation Store blob reference: opaque UTF-8, 1..=4096 bytes,
    /// compared exactly.
    ///
    /// ```
    /// use zlink_store_spi::BlobRef;
    /// assert!(BlobRef::new("ref-1").is_ok());
    /// assert!(BlobRef::new("").is_err());
    /// ```
    BlobRef, Argument::BlobReference, 1, 4096
);

impl ScanPrefix {
    /// The empty prefix (scans every key).
    pub fn all() -> Self {
        ScanPrefix(String::new())
    }

    /// Whether `key` starts with this prefix (byte-wise).
    pub fn matches(&self, key: &StoreKey) -> bool {
        key.as_bytes().starts_with(self.as_bytes())
    }
}

/// The largest Location Store value, 1 MiB.
pub const MAX_VALUE_LEN: usize = 1024 * 1024;

/// Checks a Location Store value against [`MAX_VALUE_LEN`].
pub fn check_value_len(len: usize) -> Result<(), ArgumentError> {
    check_len(Argument::Value, len, 0, MAX_VALUE_LEN)
}

/// The most keys one [`LocationStore::read_many`](crate::LocationStore::read_many) may name
/// (as many as one scan page holds).
pub const MAX_READ_MANY_KEYS: usize = 1000;

/// Checks the key count of one `read_many` against [`MAX_READ_MANY_KEYS`] (0 is allowed).
pub fn check_read_many_len(keys: usize) -> Result<(), ArgumentError> {
    check_len(Argument::ReadMany, keys, 0, MAX_READ_MANY_KEYS)
}

/// The size of the framework's immutable envelope around one relocation data chunk.
pub const BLOB_ENVELOPE_LEN: usize = 23;

/// The largest application data chunk, 64 MiB.
pub const MAX_DATA_CHUNK_LEN: usize = 64 * 1024 * 1024;

/// The largest Relocation Store blob: a 64 MiB data chunk plus its 23-byte envelope.
pub const MAX_BLOB_LEN: usize = MAX_DATA_CHUNK_LEN + BLOB_ENVELOPE_LEN;

/// Checks a Relocation Store payload against [`MAX_BLOB_LEN`].
pub fn check_blob_len(len: usize) -> Result<(), ArgumentError> {
    check_len(Argument::BlobPayload, len, 0, MAX_BLOB_LEN)
}

/// A page limit of a snapshot scan: 1..=1000 items.
///
/// ```
/// use zlink_store_spi::PageLimit;
/// assert_eq!(PageLimit::new(1000).unwrap().get(), 1000);
/// assert!(PageLimit::new(0).is_err());
/// assert!(PageLimit::new(1001).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageLimit(u16);

impl PageLimit {
    /// Smallest allowed limit.
    pub const MIN: usize = 1;
    /// Largest allowed limit.
    pub const MAX: usize = 1000;
    /// The largest page.
    pub const LARGEST: PageLimit = PageLimit(1000);

    /// Validates a limit.
    pub fn new(limit: usize) -> Result<Self, ArgumentError> {
        check_len(Argument::PageLimit, limit, Self::MIN, Self::MAX)?;
        // In range 1..=1000, so it fits.
        Ok(PageLimit(limit as u16))
    }

    /// The limit.
    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

impl TryFrom<usize> for PageLimit {
    type Error = ArgumentError;
    fn try_from(value: usize) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

/// The largest encoded scan page, 4 MiB (see [`crate::ScanItem::encoded_len`]).
pub const MAX_PAGE_ENCODED_LEN: usize = 4 * 1024 * 1024;

/// A point on a provider's wall clock: whole milliseconds since the Unix epoch.
///
/// `StoreNow` values, expiry times and retention are judged only on this clock, never on the
/// host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StoreTime(u64);

impl StoreTime {
    /// From milliseconds since the Unix epoch.
    pub const fn from_millis(ms: u64) -> Self {
        StoreTime(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// This time plus a retention, saturating.
    pub fn plus(self, retention: Retention) -> StoreTime {
        StoreTime(self.0.saturating_add(retention.as_millis()))
    }

    /// Milliseconds from `self` until `later` (0 if `later` is not after `self`).
    pub fn millis_until(self, later: StoreTime) -> u64 {
        later.0.saturating_sub(self.0)
    }

    /// The same instant as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0)
    }

    /// The host's current wall clock (for providers whose clock is the host's).
    pub fn host_now() -> StoreTime {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        StoreTime(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}

impl fmt::Display for StoreTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// How long a stored value or blob is kept: positive, whole milliseconds (a sub-millisecond
/// remainder rounds up), at most [`Retention::MAX`].
///
/// The upper bound keeps every expiry time an exact integer in all consumers of the record
/// format (below 2^53 ms).
///
/// ```
/// use std::time::Duration;
/// use zlink_store_spi::Retention;
/// assert_eq!(Retention::new(Duration::from_micros(1500)).unwrap().as_millis(), 2);
/// assert!(Retention::new(Duration::ZERO).is_err());
/// assert!(Retention::from_millis(0).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Retention(u64);

impl Retention {
    /// The longest retention: 100 years of 365 days, in milliseconds.
    pub const MAX_MILLIS: u64 = 100 * 365 * 24 * 60 * 60 * 1000;
    /// The longest retention.
    pub const MAX: Retention = Retention(Self::MAX_MILLIS);

    /// Validates a duration (rounded up to whole milliseconds).
    pub fn new(duration: Duration) -> Result<Self, ArgumentError> {
        let nanos = duration.as_nanos();
        let ms = nanos.div_ceil(1_000_000);
        if ms == 0 || ms > u128::from(Self::MAX_MILLIS) {
            return Err(ArgumentError::Retention {
                actual_ms: ms,
                max_ms: Self::MAX_MILLIS,
            });
        }
        // Bounded by MAX_MILLIS above.
        Ok(Retention(ms as u64))
    }

    /// Validates whole milliseconds.
    pub fn from_millis(ms: u64) -> Result<Self, ArgumentError> {
        Self::new(Duration::from_millis(ms))
    }

    /// Whole milliseconds.
    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// As a duration.
    pub fn as_duration(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

impl TryFrom<Duration> for Retention {
    type Error = ArgumentError;
    fn try_from(value: Duration) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}
