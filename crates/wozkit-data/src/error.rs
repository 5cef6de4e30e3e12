//! Errors of imports and exports. Each names the file, the record (dialogue id or index) and the
//! field, so a user can find the bad spot in a large corpus without a debugger.

use thiserror::Error;

/// Why a dataset file could not be read.
#[derive(Debug, Error)]
pub enum ImportError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not valid JSON: {source}")]
    Json {
        file: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file}: not a zip archive holding one JSON file: {problem}")]
    Zip { file: String, problem: String },
    #[error("{file}: CSV: {source}")]
    Csv {
        file: String,
        #[source]
        source: csv::Error,
    },
    #[error("{file}: line {line}: {problem}")]
    Line {
        file: String,
        line: usize,
        problem: String,
    },
    /// A record is readable JSON but does not have the shape the format requires.
    #[error("{file}: record {record}: field `{field}`: {problem}")]
    Field {
        file: String,
        record: String,
        field: String,
        problem: String,
    },
}

/// Why sessions could not be written in a format.
#[derive(Debug, Error)]
pub enum ExportError {
    #[error("cannot write: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot serialise JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cannot write zip archive: {0}")]
    Zip(#[from] zip::result::ZipError),
    #[error("cannot write CSV: {0}")]
    Csv(#[from] csv::Error),
    /// A session holds data that contradicts the format (e.g. a damaged annotation).
    #[error("session {session}: field `{field}`: {problem}")]
    Field {
        session: String,
        field: String,
        problem: String,
    },
}

impl ExportError {
    pub(crate) fn field(
        session: &str,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> Self {
        ExportError::Field {
            session: session.to_string(),
            field: field.into(),
            problem: problem.into(),
        }
    }
}
