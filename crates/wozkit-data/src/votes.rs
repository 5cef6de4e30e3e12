//! Pairwise votes (CRS Arena style battles) and their CSV, in the layout of CRSArena-Dial's
//! `votes_{open,closed}.csv`: `session_id,user_id,crs1,crs2,vote,feedback`, CRLF line ends,
//! fields quoted only when needed.
//!
//! A vote is an `Annotation { key: "vote" }` whose value is a [`Vote`] (the core event schema has
//! no vote kind yet). Importing the CSV gives one session per row, named by the voter's user id
//! (`#2`, `#3`… for repeated user ids), holding that one annotation; the dialogues of the battle
//! are the CRSArena-Dial sessions whose `user.id` is the same.

use std::collections::HashMap;
use std::io::Write;

use serde::{Deserialize, Serialize};

use crate::error::{ExportError, ImportError};
use crate::input::{Ctx, Input};
use crate::session::{ImportedSession, SessionBuilder};

/// The annotation key of a vote.
pub const VOTE_KEY: &str = "vote";

const HEADER: [&str; 6] = ["session_id", "user_id", "crs1", "crs2", "vote", "feedback"];

/// One pairwise vote, with the CSV's column names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vote {
    /// When the vote was cast, as the arena wrote it (`YYYY-MM-DD HH:MM:SS[.ffffff]`).
    pub session_id: String,
    pub user_id: String,
    /// The system shown first (left).
    pub crs1: String,
    /// The system shown second (right).
    pub crs2: String,
    /// The id of the preferred system, or `"tie"`.
    pub vote: String,
    /// Optional free text; `""` when none was given.
    pub feedback: String,
}

impl Vote {
    /// The score of `crs1` against `crs2`: 1 win, 0 loss, 0.5 tie (or a vote for neither).
    pub fn score(&self) -> f64 {
        if self.vote == self.crs1 && self.vote != self.crs2 {
            1.0
        } else if self.vote == self.crs2 && self.vote != self.crs1 {
            0.0
        } else {
            0.5
        }
    }
}

/// Reads a votes CSV: one session per row.
pub fn import_votes_csv(input: &Input) -> Result<Vec<ImportedSession>, ImportError> {
    let csv_err = |source| ImportError::Csv {
        file: input.name().to_string(),
        source,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_reader(input.bytes());
    let header = reader.headers().map_err(csv_err)?.clone();
    if header.iter().ne(HEADER) {
        let found = header.iter().collect::<Vec<_>>().join(",");
        let problem = format!("expected columns {}, found {found}", HEADER.join(","));
        return Err(Ctx::new(input.name(), "header").err("", problem));
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut sessions = Vec::new();
    for record in reader.records() {
        let record = record.map_err(csv_err)?;
        let field = |i: usize| record.get(i).unwrap_or_default().to_string();
        let vote = Vote {
            session_id: field(0),
            user_id: field(1),
            crs1: field(2),
            crs2: field(3),
            vote: field(4),
            feedback: field(5),
        };
        let count = seen.entry(vote.user_id.clone()).or_insert(0);
        *count += 1;
        let id = match *count {
            1 => vote.user_id.clone(),
            n => format!("{}#{n}", vote.user_id),
        };
        let mut session = SessionBuilder::new(id);
        let value = serde_json::to_value(&vote).map_err(|source| ImportError::Json {
            file: input.name().to_string(),
            source,
        })?;
        session.annotate(VOTE_KEY, value);
        sessions.push(session.finish());
    }
    Ok(sessions)
}

/// Every vote of the sessions, in log order.
pub fn votes(sessions: &[ImportedSession]) -> Result<Vec<Vote>, ExportError> {
    let mut out = Vec::new();
    for session in sessions {
        out.extend(session_votes(session)?);
    }
    Ok(out)
}

/// The votes of one session, in log order.
pub fn session_votes(session: &ImportedSession) -> Result<Vec<Vote>, ExportError> {
    session
        .annotations(VOTE_KEY)
        .map(|value| {
            serde_json::from_value(value.clone())
                .map_err(|e| ExportError::field(&session.id, VOTE_KEY, e.to_string()))
        })
        .collect()
}

/// Writes every vote of the sessions as CSV.
pub fn export_votes_csv(sessions: &[ImportedSession], out: impl Write) -> Result<(), ExportError> {
    let mut writer = VotesWriter::new(out)?;
    for session in sessions {
        writer.session(session)?;
    }
    writer.finish()?;
    Ok(())
}

/// The votes CSV written one session at a time (exports streamed from the store).
pub struct VotesWriter<W: Write> {
    writer: csv::Writer<W>,
}

impl<W: Write> VotesWriter<W> {
    /// Starts the file with its header.
    pub fn new(out: W) -> Result<Self, ExportError> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .terminator(csv::Terminator::CRLF)
            .from_writer(out);
        writer.write_record(HEADER)?;
        Ok(VotesWriter { writer })
    }

    /// Writes the session's votes; returns how many.
    pub fn session(&mut self, session: &ImportedSession) -> Result<usize, ExportError> {
        let votes = session_votes(session)?;
        for vote in &votes {
            self.writer.serialize(vote)?;
        }
        Ok(votes.len())
    }

    /// Writes one vote.
    pub fn vote(&mut self, vote: &Vote) -> Result<(), ExportError> {
        self.writer.serialize(vote)?;
        Ok(())
    }

    /// Flushes the CSV and gives the output back.
    pub fn finish(self) -> Result<W, ExportError> {
        self.writer
            .into_inner()
            .map_err(|e| ExportError::Io(e.into_error()))
    }
}
