//! The CLI's one error type and its exit codes.

/// What went wrong, coarsely (each kind has its exit code, see the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bad arguments or input (exit 2).
    Usage,
    /// The Store or Redis could not be reached or refused (exit 4).
    Store,
}

impl ErrorKind {
    /// The process exit code of this kind.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Usage => 2,
            ErrorKind::Store => 4,
        }
    }
}

/// An error of the `zlink` tool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// A Redis command of the raw reader failed.
    #[error("redis: {0}")]
    Redis(#[source] fred::error::Error),
    /// The Location Store provider failed.
    #[error("location store: {0}")]
    Store(#[source] zlink_store_spi::StoreError),
    /// The location runtime failed.
    #[error("location runtime: {0}")]
    Location(#[source] zlink_location::LocationError),
    /// An argument is not valid.
    #[error("invalid {what}: {reason}")]
    Input {
        /// Which argument.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A key or bound built from an argument is not valid.
    #[error("invalid argument: {0}")]
    Argument(#[source] zlink_store_spi::ArgumentError),
    /// A Redis reply did not have the shape its command answers.
    #[error("unexpected reply to {command}")]
    Reply {
        /// The command.
        command: &'static str,
    },
}

impl CliError {
    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CliError::Input { .. } | CliError::Argument(_) => ErrorKind::Usage,
            CliError::Redis(_)
            | CliError::Store(_)
            | CliError::Location(_)
            | CliError::Reply { .. } => ErrorKind::Store,
        }
    }

    /// An invalid argument.
    pub fn input(what: &'static str, reason: impl Into<String>) -> Self {
        CliError::Input {
            what,
            reason: reason.into(),
        }
    }
}

impl From<fred::error::Error> for CliError {
    fn from(e: fred::error::Error) -> Self {
        CliError::Redis(e)
    }
}

impl From<zlink_store_spi::StoreError> for CliError {
    fn from(e: zlink_store_spi::StoreError) -> Self {
        CliError::Store(e)
    }
}

impl From<zlink_location::LocationError> for CliError {
    fn from(e: zlink_location::LocationError) -> Self {
        CliError::Location(e)
    }
}

impl From<zlink_store_spi::ArgumentError> for CliError {
    fn from(e: zlink_store_spi::ArgumentError) -> Self {
        CliError::Argument(e)
    }
}
