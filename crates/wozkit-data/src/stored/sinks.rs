//! The writers behind [`export_store`](super::export_store), one per kind of file: streamed
//! lines (JSON Lines, CSV), a JSON document assembled from rendered records, and one file per
//! dialogue. Dataset formats also write the [sidecar](crate::sidecar) as sessions arrive.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zip::write::{SimpleFileOptions, StreamWriter};

use super::StoredSession;
use super::export::{ExportFormat, StoreExportError};
use crate::error::ExportError;
use crate::export_crwiz;
use crate::formats::convlab3::ontology::Ontology;
use crate::formats::{self, Container};
use crate::mapping::Mappings;
use crate::output::{JsonStream, pretty};
use crate::session::Format;
use crate::sidecar::{SidecarLine, lost_events, shaped_turns, sidecar_path};
use crate::survey::SurveyWriter;
use crate::votes::VotesWriter;

/// What adding one session did.
pub(crate) struct Added {
    /// The session is in the export.
    pub written: bool,
    /// Some of its events went to the sidecar.
    pub sidecar: bool,
}

/// One output file (or folder) being written.
pub(crate) trait Sink {
    fn add(&mut self, session: &StoredSession) -> Result<Added, StoreExportError>;
    /// Finishes the files; returns their paths.
    fn finish(self: Box<Self>) -> Result<Vec<PathBuf>, StoreExportError>;
    /// Adds votes that are in no dialogue session (the live arena's, kept in participant
    /// logs); returns how many were written. Only the votes CSV writes them.
    fn add_votes(&mut self, _votes: &[crate::votes::Vote]) -> Result<usize, StoreExportError> {
        Ok(0)
    }
}

/// The ontology shared by the parts of one ConvLab-3 dataset export: each part adds its
/// dialogues, and every part writes the whole (the parts are finished after every session is
/// added), so the parts union into one dataset.
pub(crate) type SharedOntology = Arc<Mutex<Ontology>>;

/// The sink of `format` writing to `out`, each session with its study's dataset mapping in
/// `mappings`.
pub(crate) fn open(
    format: ExportFormat,
    out: &Path,
    mappings: &Mappings,
) -> Result<Box<dyn Sink>, StoreExportError> {
    open_part(format, out, None, &SharedOntology::default(), mappings)
}

/// Whether a ConvLab-3 export to `out` writes the dataset folder (`data.zip` with
/// `data/ontology.json` and `data/dialogues.json`, and `dummy_data.json`): any path not ending
/// in `.json` or `.zip`, which get the dialogue list alone.
pub(crate) fn is_convlab3_folder(out: &Path) -> bool {
    let name = out.to_string_lossy();
    !(name.ends_with(".json") || name.ends_with(".zip"))
}

/// The sink of the part `part` of a split export (`None`: no split); the ConvLab-3 parts of one
/// export share `ontology`.
pub(crate) fn open_part(
    format: ExportFormat,
    out: &Path,
    part: Option<&str>,
    ontology: &SharedOntology,
    mappings: &Mappings,
) -> Result<Box<dyn Sink>, StoreExportError> {
    Ok(match format {
        ExportFormat::Dataset(Format::Crwiz) => Box::new(PerDialogue::create(out)?),
        ExportFormat::Dataset(Format::ConvLab3) if is_convlab3_folder(out) => {
            let mut doc = Document::new(Format::ConvLab3, out);
            doc.mappings = mappings.clone();
            doc.part = part.map(str::to_string);
            doc.dataset = Some(ontology.clone());
            doc.sidecar = Sidecar::new(Format::ConvLab3, &out.join("data.zip"));
            Box::new(doc)
        }
        ExportFormat::Dataset(format) => {
            let mut doc = Document::new(format, out);
            doc.mappings = mappings.clone();
            doc.part = part.map(str::to_string);
            Box::new(doc)
        }
        ExportFormat::Jsonl => Box::new(Lines::Jsonl(OutFile::create(out)?)),
        ExportFormat::VotesCsv => Box::new(Lines::Votes(VotesWriter::new(OutFile::create(out)?)?)),
        ExportFormat::SurveyCsv => {
            Box::new(Lines::Survey(SurveyWriter::new(OutFile::create(out)?)?))
        }
        ExportFormat::JudgmentsJsonl | ExportFormat::JudgmentsCsv => {
            return Err(StoreExportError::Options(
                "judgments are read from participant logs by export_judgments".into(),
            ));
        }
    })
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> StoreExportError + '_ {
    move |error| StoreExportError::Io {
        path: path.display().to_string(),
        error,
    }
}

/// A file being written, zipped when its name ends in `.zip` (the entry is the name without
/// `.zip`).
pub(crate) enum OutFile {
    Plain(PathBuf, BufWriter<File>),
    Zip(PathBuf, Box<zip::ZipWriter<StreamWriter<BufWriter<File>>>>),
}

impl OutFile {
    pub fn create(path: &Path) -> Result<OutFile, StoreExportError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let file = BufWriter::new(File::create(path).map_err(io_err(path))?);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(entry) = name.strip_suffix(".zip").filter(|e| !e.is_empty()) else {
            return Ok(OutFile::Plain(path.to_path_buf(), file));
        };
        let mut zip = zip::ZipWriter::new_stream(file);
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(entry, options).map_err(ExportError::from)?;
        Ok(OutFile::Zip(path.to_path_buf(), Box::new(zip)))
    }

    pub fn finish(self) -> Result<PathBuf, StoreExportError> {
        match self {
            OutFile::Plain(path, mut file) => {
                file.flush().map_err(io_err(&path))?;
                Ok(path)
            }
            OutFile::Zip(path, zip) => {
                let mut file = zip.finish().map_err(ExportError::from)?.into_inner();
                file.flush().map_err(io_err(&path))?;
                Ok(path)
            }
        }
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            OutFile::Plain(_, file) => file.write(buf),
            OutFile::Zip(_, zip) => zip.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            OutFile::Plain(_, file) => file.flush(),
            OutFile::Zip(_, zip) => zip.flush(),
        }
    }
}

/// Files written line by line as sessions arrive.
enum Lines {
    Jsonl(OutFile),
    Votes(VotesWriter<OutFile>),
    Survey(SurveyWriter<OutFile>),
}

impl Sink for Lines {
    fn add(&mut self, session: &StoredSession) -> Result<Added, StoreExportError> {
        let written = match self {
            Lines::Jsonl(out) => {
                for event in &session.events {
                    serde_json::to_writer(&mut *out, event).map_err(ExportError::from)?;
                    out.write_all(b"\n").map_err(ExportError::from)?;
                }
                true
            }
            Lines::Votes(writer) => writer.session(&session.dataset_view())? > 0,
            Lines::Survey(writer) => writer.session(&session.dataset_view())? > 0,
        };
        Ok(Added {
            written,
            sidecar: false,
        })
    }

    fn add_votes(&mut self, votes: &[crate::votes::Vote]) -> Result<usize, StoreExportError> {
        let Lines::Votes(writer) = self else {
            return Ok(0);
        };
        for vote in votes {
            writer.vote(vote)?;
        }
        Ok(votes.len())
    }

    fn finish(self: Box<Self>) -> Result<Vec<PathBuf>, StoreExportError> {
        let out = match *self {
            Lines::Jsonl(out) => out,
            Lines::Votes(writer) => writer.finish()?,
            Lines::Survey(writer) => writer.finish()?,
        };
        Ok(vec![out.finish()?])
    }
}

/// The sidecar of one export, created on its first line.
struct Sidecar {
    format: Format,
    path: PathBuf,
    file: Option<BufWriter<File>>,
}

impl Sidecar {
    fn new(format: Format, export: &Path) -> Self {
        Sidecar {
            format,
            path: sidecar_path(export),
            file: None,
        }
    }

    /// Writes the session's lost events, if any; returns whether there were some.
    fn add(&mut self, session: &crate::ImportedSession) -> Result<bool, StoreExportError> {
        let events = lost_events(self.format, session);
        if events.is_empty() {
            return Ok(false);
        }
        let line = SidecarLine {
            format: self.format.name().to_string(),
            session: session.id.clone(),
            events: events.into_iter().cloned().collect(),
            turns: shaped_turns(self.format, session),
        };
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
                }
                let file = File::create(&self.path).map_err(io_err(&self.path))?;
                self.file.insert(BufWriter::new(file))
            }
        };
        serde_json::to_writer(&mut *file, &line).map_err(ExportError::from)?;
        file.write_all(b"\n").map_err(io_err(&self.path))?;
        Ok(true)
    }

    fn finish(self) -> Result<Option<PathBuf>, StoreExportError> {
        match self.file {
            Some(mut file) => {
                file.flush().map_err(io_err(&self.path))?;
                Ok(Some(self.path))
            }
            None => {
                // An earlier export's sidecar would describe other sessions.
                match std::fs::remove_file(&self.path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        Err(io_err(&self.path)(e))
                    }
                    _ => Ok(None),
                }
            }
        }
    }
}

type OrderKey = (u64, u64, String);

/// One JSON array or object: each record is rendered as its session arrives, parked in a spool
/// file beside the export, and the file is written in import order at the end. Memory holds
/// only each record's key and place in the spool, however large the records are.
struct Document {
    format: Format,
    out: PathBuf,
    /// Order key, dialogue id (the key in keyed formats), and offset and length in the spool.
    records: Vec<(OrderKey, String, u64, usize)>,
    keys: HashSet<String>,
    spool: Spool,
    sidecar: Sidecar,
    /// The part of a split export this document holds.
    part: Option<String>,
    /// A ConvLab-3 dataset folder: the ontology of the whole export.
    dataset: Option<SharedOntology>,
    /// The first dialogues of a dataset folder, for `dummy_data.json`.
    dummy: Vec<serde_json::Value>,
    /// The studies' dataset mappings.
    mappings: Mappings,
}

impl Document {
    fn new(format: Format, out: &Path) -> Self {
        let mut spool = out.as_os_str().to_owned();
        spool.push(".wozkit-spool");
        Document {
            format,
            out: out.to_path_buf(),
            records: Vec::new(),
            keys: HashSet::new(),
            spool: Spool {
                path: PathBuf::from(spool),
                file: None,
                len: 0,
            },
            sidecar: Sidecar::new(format, out),
            part: None,
            dataset: None,
            dummy: Vec::new(),
            mappings: Mappings::default(),
        }
    }
}

/// How many dialogues `dummy_data.json` holds (as ConvLab-3's datasets do).
const DUMMY_DIALOGUES: usize = 10;

impl Sink for Document {
    fn add(&mut self, session: &StoredSession) -> Result<Added, StoreExportError> {
        let view = session.dataset_view();
        let (container, indent) = self.format.container();
        let part = self.part.as_deref();
        let record =
            formats::record_in_part(self.format, &view, self.records.len(), part, &self.mappings)?;
        let written = record.is_some();
        if let Some(record) = record {
            if let (Some(ontology), Some(dialogue)) = (&self.dataset, record.as_object()) {
                if let Ok(mut o) = ontology.lock() {
                    o.add_dialogue(dialogue);
                }
                if self.dummy.len() < DUMMY_DIALOGUES {
                    self.dummy.push(record.clone());
                }
            }
            if container == Container::Object && !self.keys.insert(view.id.clone()) {
                let problem = "two sessions have this id, and the file is keyed by id; export \
                               one study at a time (--study import:<format>)";
                return Err(ExportError::field(&view.id, "id", problem).into());
            }
            let text = pretty(&record, indent)?;
            let offset = self.spool.push(&text)?;
            self.records
                .push((session.order_key(), view.id.clone(), offset, text.len()));
        }
        let sidecar = self.sidecar.add(&view)?;
        Ok(Added { written, sidecar })
    }

    fn finish(mut self: Box<Self>) -> Result<Vec<PathBuf>, StoreExportError> {
        self.records.sort_by(|a, b| a.0.cmp(&b.0));
        let (container, indent) = self.format.container();
        let mut spool = self.spool.reopen()?;
        if let Some(ontology) = self.dataset.take() {
            return self.finish_dataset(&ontology, spool);
        }
        let mut file = OutFile::create(&self.out)?;
        let mut stream = match container {
            Container::Object => JsonStream::object(&mut file, indent)?,
            _ => JsonStream::array(&mut file, indent)?,
        };
        let mut text = Vec::new();
        for (_, key, offset, len) in &self.records {
            text.resize(*len, 0);
            if let Some(spool) = spool.as_mut() {
                spool
                    .seek(SeekFrom::Start(*offset))
                    .map_err(ExportError::from)?;
                spool.read_exact(&mut text).map_err(ExportError::from)?;
            }
            match container {
                Container::Object => stream.entry_text(key, &text)?,
                _ => stream.item_text(&text)?,
            }
        }
        stream.finish()?;
        let mut files = vec![file.finish()?];
        let Document { sidecar, .. } = *self;
        files.extend(sidecar.finish()?);
        Ok(files)
    }
}

impl Document {
    /// Writes a ConvLab-3 dataset folder: `data.zip` (`data/ontology.json`,
    /// `data/dialogues.json`) and `dummy_data.json`.
    fn finish_dataset(
        mut self: Box<Self>,
        ontology: &SharedOntology,
        mut spool: Option<File>,
    ) -> Result<Vec<PathBuf>, StoreExportError> {
        let dir = self.out.clone();
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let zip_path = dir.join("data.zip");
        let file = BufWriter::new(File::create(&zip_path).map_err(io_err(&zip_path))?);
        let mut zip = zip::ZipWriter::new_stream(file);
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        let ontology = ontology
            .lock()
            .map(|o| o.to_value())
            .unwrap_or(serde_json::Value::Null);
        zip.start_file("data/ontology.json", options)
            .map_err(ExportError::from)?;
        zip.write_all(&pretty(&ontology, 2)?)
            .map_err(ExportError::from)?;
        zip.start_file("data/dialogues.json", options)
            .map_err(ExportError::from)?;
        {
            let mut stream = JsonStream::array(&mut zip, 2)?;
            let mut text = Vec::new();
            for (_, _, offset, len) in &self.records {
                text.resize(*len, 0);
                if let Some(spool) = spool.as_mut() {
                    spool
                        .seek(SeekFrom::Start(*offset))
                        .map_err(ExportError::from)?;
                    spool.read_exact(&mut text).map_err(ExportError::from)?;
                }
                stream.item_text(&text)?;
            }
            stream.finish()?;
        }
        let mut file = zip.finish().map_err(ExportError::from)?.into_inner();
        file.flush().map_err(io_err(&zip_path))?;
        let dummy_path = dir.join("dummy_data.json");
        let dummy = serde_json::Value::Array(std::mem::take(&mut self.dummy));
        std::fs::write(&dummy_path, pretty(&dummy, 2)?).map_err(io_err(&dummy_path))?;
        let mut files = vec![zip_path, dummy_path];
        let Document { sidecar, .. } = *self;
        files.extend(sidecar.finish()?);
        Ok(files)
    }
}

/// A scratch file of rendered records, removed when dropped.
struct Spool {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    len: u64,
}

impl Spool {
    /// Appends `text`; returns its offset.
    fn push(&mut self, text: &[u8]) -> Result<u64, StoreExportError> {
        let file = match &mut self.file {
            Some(file) => file,
            None => {
                if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
                }
                let file = File::options()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&self.path)
                    .map_err(io_err(&self.path))?;
                self.file.insert(BufWriter::new(file))
            }
        };
        file.write_all(text).map_err(io_err(&self.path))?;
        let offset = self.len;
        self.len += text.len() as u64;
        Ok(offset)
    }

    /// The spool, written out and ready to read (`None` if nothing was spooled).
    fn reopen(&mut self) -> Result<Option<File>, StoreExportError> {
        let Some(file) = self.file.take() else {
            return Ok(None);
        };
        let file = file
            .into_inner()
            .map_err(|e| io_err(&self.path)(e.into_error()))?;
        // Keep the handle; the path is removed on drop.
        Ok(Some(file))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        // The spool is scratch space; a leftover file only wastes disk, so errors are ignored.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One file per dialogue in a folder (CRWIZ): `<dialogue id>.shcn.data.json`.
struct PerDialogue {
    dir: PathBuf,
    written: Vec<PathBuf>,
    sidecar: Sidecar,
}

impl PerDialogue {
    fn create(dir: &Path) -> Result<Self, StoreExportError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(PerDialogue {
            dir: dir.to_path_buf(),
            written: Vec::new(),
            sidecar: Sidecar::new(Format::Crwiz, dir),
        })
    }
}

impl Sink for PerDialogue {
    fn add(&mut self, session: &StoredSession) -> Result<Added, StoreExportError> {
        let view = session.dataset_view();
        let written = view.messages().next().is_some()
            || view
                .annotations(Format::Crwiz.dialogue_key())
                .next()
                .is_some();
        if written {
            let name: String = view
                .id
                .chars()
                .map(|c| {
                    if c.is_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = self.dir.join(format!("{name}.shcn.data.json"));
            let mut file = OutFile::create(&path)?;
            export_crwiz(std::slice::from_ref(&view), &mut file)?;
            self.written.push(file.finish()?);
        }
        let sidecar = self.sidecar.add(&view)?;
        Ok(Added { written, sidecar })
    }

    fn finish(self: Box<Self>) -> Result<Vec<PathBuf>, StoreExportError> {
        let mut files = self.written;
        files.extend(self.sidecar.finish()?);
        Ok(files)
    }
}
