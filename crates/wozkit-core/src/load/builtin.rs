//! Studies built into the binary (the `studies/` folder of this crate, embedded at compile time).

use rust_embed::Embed;

#[derive(Embed)]
#[folder = "studies/"]
struct Builtin;

/// Names of the built-in studies, the default demo first.
pub fn builtin_names() -> Vec<String> {
    let mut names: Vec<String> = Builtin::iter()
        .filter_map(|p| p.strip_suffix("/study.yaml").map(str::to_string))
        .collect();
    names.sort_by_key(|n| (n != "offshore-emergency", n.clone()));
    names
}

/// Relative paths of every file of a built-in study.
pub fn builtin_files(name: &str) -> Vec<String> {
    let prefix = format!("{name}/");
    Builtin::iter()
        .filter_map(|p| p.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

/// Reads one file of a built-in study.
pub fn read(name: &str, rel: &str) -> Option<Vec<u8>> {
    Builtin::get(&format!("{name}/{rel}")).map(|f| f.data.into_owned())
}
