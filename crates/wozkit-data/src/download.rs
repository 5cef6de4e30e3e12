//! Exports as downloads: [`export_store_mapped`] run into a private temporary folder whose files
//! are read back into memory (then the folder is removed), and [`zip_files`] to send several files
//! as one archive. Used by the researcher console, which serves exports while the server runs.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use wozkit_store::Store;
use zip::write::SimpleFileOptions;

use crate::acts::TurnActs;
use crate::error::ExportError;
use crate::formats::taskmaster1::SpanSegments;
use crate::mapping::Mappings;
use crate::session::Format;
use crate::stored::NoProgress;
use crate::stored::export::{ExportFormat, ExportOptions, StoreExportError, export_store_mapped};

/// One file of a download: its name (with `/` between folders) and its bytes.
pub type NamedFile = (String, Vec<u8>);

/// The file name an export of `format` gets, for a study named `base` (CRWIZ writes a folder of
/// that name).
pub fn export_file_name(format: ExportFormat, base: &str) -> String {
    match format {
        ExportFormat::Dataset(Format::Crwiz) => format!("{base}.crwiz"),
        ExportFormat::Dataset(Format::CrsArena) => format!("crs_arena_dial_{base}.json"),
        ExportFormat::Dataset(f) => format!("{base}.{}.json", f.name()),
        ExportFormat::Jsonl => format!("{base}.jsonl"),
        ExportFormat::SurveyCsv => format!("{base}.survey.csv"),
        ExportFormat::VotesCsv => format!("{base}.votes.csv"),
        ExportFormat::JudgmentsJsonl => format!("{base}.judgments.jsonl"),
        ExportFormat::JudgmentsCsv => format!("{base}.judgments.csv"),
    }
}

/// A folder removed with everything in it when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<TempDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "wozkit-download-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // `create_dir` fails when the folder exists: nobody else's files are ever read back.
        std::fs::create_dir(&path)?;
        Ok(TempDir(path))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> StoreExportError + '_ {
    move |error| StoreExportError::Io {
        path: path.display().to_string(),
        error,
    }
}

/// Exports the sessions of `study` (every study when `None`; test sessions only when
/// `include_test`) in `format`, named after `base`, and returns every file written (sidecars
/// and votes included), sorted by name; the built-in studies' dataset mappings apply. The files
/// pass through a temporary folder: this does blocking file work, so callers on an async server
/// run it on a blocking thread.
pub async fn export_into_memory(
    store: &dyn Store,
    format: ExportFormat,
    study: Option<&str>,
    include_test: bool,
    base: &str,
) -> Result<Vec<NamedFile>, StoreExportError> {
    export_into_memory_annotated(
        store,
        format,
        study,
        include_test,
        base,
        &TurnActs::default(),
        Mappings::builtin(),
    )
    .await
}

/// As [`export_into_memory`], each session's turns given their adjudicated dialogue acts in
/// the formats with acts, as `wozkit export --acts-from` does, and written with the dataset
/// mappings of `mappings` ([`export_store_mapped`]; a server passes those of the studies it
/// serves, as `wozkit export --mapping` does).
pub async fn export_into_memory_annotated(
    store: &dyn Store,
    format: ExportFormat,
    study: Option<&str>,
    include_test: bool,
    base: &str,
    acts: &TurnActs,
    mappings: &Mappings,
) -> Result<Vec<NamedFile>, StoreExportError> {
    let dir = TempDir::new().map_err(io_err(&std::env::temp_dir()))?;
    let options = ExportOptions {
        format,
        out: dir.0.join(export_file_name(format, base)),
        split: None,
        study: study.map(str::to_string),
        include_test,
    };
    export_store_mapped(
        store,
        &options,
        &SpanSegments::default(),
        acts,
        mappings,
        &NoProgress,
    )
    .await?;
    let mut files = vec![];
    read_tree(&dir.0, "", &mut files)?;
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

fn read_tree(dir: &Path, prefix: &str, out: &mut Vec<NamedFile>) -> Result<(), StoreExportError> {
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        let path = entry.path();
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if path.is_dir() {
            read_tree(&path, &format!("{name}/"), out)?;
        } else {
            out.push((name, std::fs::read(&path).map_err(io_err(&path))?));
        }
    }
    Ok(())
}

/// A zip archive (deflated) holding `files` under their names.
pub fn zip_files(files: &[NamedFile]) -> Result<Vec<u8>, ExportError> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        zip.start_file(name.as_str(), options)?;
        zip.write_all(bytes)?;
    }
    Ok(zip.finish()?.into_inner())
}

/// The files of a zip archive, in the archive's order (to check a download).
pub fn unzip_files(bytes: &[u8]) -> Result<Vec<NamedFile>, ExportError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))?;
    let mut files = Vec::with_capacity(archive.len());
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i)?;
        let mut data = vec![];
        std::io::Read::read_to_end(&mut entry, &mut data)?;
        files.push((entry.name()?.to_string(), data));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zip_holds_the_files_given() {
        let files = vec![
            ("a.json".to_string(), b"[1]".to_vec()),
            ("d/b.json".to_string(), b"{}".to_vec()),
        ];
        let bytes = zip_files(&files).unwrap();
        assert_eq!(unzip_files(&bytes).unwrap(), files);
        let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
        assert_eq!(archive.len(), 2);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut archive.by_name("d/b.json").unwrap(), &mut text)
            .unwrap();
        assert_eq!(text, "{}");
    }

    #[test]
    fn names_follow_the_format() {
        assert_eq!(
            export_file_name(ExportFormat::Jsonl, "s"),
            "s.jsonl".to_string()
        );
        assert!(
            export_file_name(ExportFormat::Dataset(Format::MultiWoz21), "s").ends_with(".json")
        );
    }
}
