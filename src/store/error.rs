//! What the store can fail with. Handlers map these to JSON-RPC kinds by `class()`.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "store already owned: {path} is held by {owner} (lease {lock}); stop that process or \
         pass --storage-path to use another database"
    )]
    Owned {
        path: PathBuf,
        lock: PathBuf,
        owner: String,
    },
    #[error("session not found: {0}")]
    SessionNotFound(String),
    #[error("record not found: {0}")]
    RecordNotFound(String),
    #[error("no user message to fork before: {0}")]
    NoUserMessage(String),
    #[error("user message index {index} not addressable in record: {record}")]
    UserIndex { index: u64, record: String },
    #[error("record already exists: {0}; pick another newRecordId or omit it")]
    RecordExists(String),
    #[error("lineage cycle at record {0}: its seed provenance loops back on itself")]
    Cycle(String),
    #[error("invalid {what}: {why}")]
    Invalid { what: &'static str, why: String },
    #[error(
        "{path} has schema version {found}, newer than this build's {supported}; upgrade \
         outrigger or pass --storage-path to use another database"
    )]
    NewerSchema {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("cannot open the store at {path}: {why}")]
    Open { path: PathBuf, why: String },
    #[error("storage failure: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("storage failure: cannot encode an entry: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("storage failure: the store task failed: {0}")]
    Task(String),
}

/// How a failure reads on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    NotFound,
    InvalidParams,
    Storage,
}

impl StoreError {
    pub fn class(&self) -> ErrorClass {
        match self {
            StoreError::SessionNotFound(_)
            | StoreError::RecordNotFound(_)
            | StoreError::NoUserMessage(_)
            | StoreError::UserIndex { .. } => ErrorClass::NotFound,
            StoreError::RecordExists(_) | StoreError::Invalid { .. } => ErrorClass::InvalidParams,
            StoreError::Owned { .. }
            | StoreError::Cycle(_)
            | StoreError::NewerSchema { .. }
            | StoreError::Open { .. }
            | StoreError::Sqlite(_)
            | StoreError::Encode(_)
            | StoreError::Task(_) => ErrorClass::Storage,
        }
    }

    pub(crate) fn invalid(what: &'static str, why: impl Into<String>) -> Self {
        StoreError::Invalid {
            what,
            why: why.into(),
        }
    }
}
