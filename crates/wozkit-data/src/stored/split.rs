//! Train/dev/test splits of an export: `train=0.8,dev=0.1,test=0.1` with a seed. The sessions
//! (sorted by id) are shuffled by a ChaCha8 generator seeded with the seed and cut into parts of
//! the given fractions (largest remainder, so the sizes add up), so the same seed over the same
//! sessions always gives the same split.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// Named parts and their fractions, in the order given.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitSpec {
    pub parts: Vec<(String, f64)>,
    pub seed: u64,
}

impl SplitSpec {
    /// Parses `name=fraction,…`. Fractions must be ≥ 0 and add up to 1 (± 0.001); names must be
    /// distinct and made of letters, digits, `-` and `_` (they become file names).
    pub fn parse(text: &str, seed: u64) -> Result<SplitSpec, String> {
        let mut parts: Vec<(String, f64)> = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((name, fraction)) = item.split_once('=') else {
                return Err(format!("`{item}`: expected NAME=FRACTION, e.g. train=0.8"));
            };
            let name = name.trim();
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
            if name.is_empty() || !name.chars().all(valid) {
                return Err(format!(
                    "`{name}`: a part name uses letters, digits, - and _"
                ));
            }
            if parts.iter().any(|(n, _)| n == name) {
                return Err(format!("`{name}` is named twice"));
            }
            let fraction: f64 = fraction
                .trim()
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite() && *f >= 0.0)
                .ok_or_else(|| format!("`{item}`: the fraction must be a number ≥ 0"))?;
            parts.push((name.to_string(), fraction));
        }
        let total: f64 = parts.iter().map(|(_, f)| f).sum();
        if parts.is_empty() || (total - 1.0).abs() > 1e-3 {
            return Err(format!(
                "the fractions add up to {total}, not 1 (e.g. train=0.8,dev=0.1,test=0.1)"
            ));
        }
        Ok(SplitSpec { parts, seed })
    }

    /// How many of `n` sessions each part gets: floor of each share, then the remaining ones to
    /// the largest remainders (earlier parts first on a tie).
    pub fn sizes(&self, n: usize) -> Vec<usize> {
        let total: f64 = self.parts.iter().map(|(_, f)| f).sum();
        let shares: Vec<f64> = self
            .parts
            .iter()
            .map(|(_, f)| f / total * n as f64)
            .collect();
        let mut sizes: Vec<usize> = shares.iter().map(|s| s.floor() as usize).collect();
        let mut order: Vec<usize> = (0..shares.len()).collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (shares[a] - shares[a].floor(), shares[b] - shares[b].floor());
            rb.total_cmp(&ra).then(a.cmp(&b))
        });
        let assigned: usize = sizes.iter().sum();
        for &i in order.iter().cycle().take(n.saturating_sub(assigned)) {
            sizes[i] += 1;
        }
        sizes
    }

    /// The part (index into `parts`) of each session id.
    pub fn assign(&self, ids: &[String]) -> HashMap<String, usize> {
        let mut shuffled: Vec<&String> = ids.iter().collect();
        shuffled.sort();
        shuffled.dedup();
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        shuffled.shuffle(&mut rng);
        let mut out = HashMap::with_capacity(shuffled.len());
        let mut rest = shuffled.as_slice();
        for (part, size) in self.sizes(rest.len()).into_iter().enumerate() {
            let (these, more) = rest.split_at(size.min(rest.len()));
            out.extend(these.iter().map(|id| ((*id).clone(), part)));
            rest = more;
        }
        out
    }
}

/// The path of one part's file: the part name inserted before the extensions
/// (`out/test.json.zip` → `out/test.train.json.zip`); a path without a dot gets `/<part>`
/// (a folder, as for CRWIZ).
pub fn part_path(out: &Path, part: &str) -> PathBuf {
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.split_once('.') {
        Some((stem, extensions)) if !stem.is_empty() => {
            out.with_file_name(format!("{stem}.{part}.{extensions}"))
        }
        _ => out.join(part),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_add_up_and_follow_the_fractions() {
        let spec = SplitSpec::parse("train=0.8,dev=0.1,test=0.1", 7).expect("valid");
        assert_eq!(spec.sizes(1000), vec![800, 100, 100]);
        assert_eq!(spec.sizes(7).iter().sum::<usize>(), 7);
        assert_eq!(spec.sizes(0), vec![0, 0, 0]);
        assert!(SplitSpec::parse("train=0.8,dev=0.1", 7).is_err());
        assert!(SplitSpec::parse("a/b=1", 7).is_err());
    }

    #[test]
    fn assignment_depends_only_on_seed_and_ids() {
        let ids: Vec<String> = (0..50).map(|i| format!("s{i}")).collect();
        let mut reversed = ids.clone();
        reversed.reverse();
        let spec = SplitSpec::parse("train=0.6,test=0.4", 3).expect("valid");
        let one = spec.assign(&ids);
        assert_eq!(one, spec.assign(&reversed));
        assert_eq!(one.values().filter(|&&p| p == 0).count(), 30);
        let other = SplitSpec::parse("train=0.6,test=0.4", 4).expect("valid");
        assert_ne!(one, other.assign(&ids));
    }

    #[test]
    fn part_paths_keep_the_extensions() {
        assert_eq!(
            part_path(Path::new("out/test.json.zip"), "dev"),
            PathBuf::from("out/test.dev.json.zip")
        );
        assert_eq!(
            part_path(Path::new("out/crwiz"), "dev"),
            PathBuf::from("out/crwiz/dev")
        );
    }
}
