//! `pi models pull` and `pi models list`: getting GGUF model files into `<agent dir>/models/`,
//! where the local provider finds them (issue 3).
//!
//! `pi models pull <target>` downloads from the Hugging Face hub with the `hf-hub` crate
//! (`$HF_ENDPOINT` overrides the hub's address, `$HF_TOKEN` or the token file under `$HF_HOME`
//! authenticates). The target is one of:
//!
//! * a short name from [`SHORT_NAMES`], e.g. `smollm2-135m`;
//! * `owner/repo/path/file.gguf` (or a `https://huggingface.co/owner/repo/resolve/<rev>/file.gguf`
//!   URL): that file;
//! * `owner/repo` or `owner/repo:QUANT`: the repository's GGUF files are listed and one is picked
//!   (the one matching `QUANT`, else the first of [`QUANT_PREFERENCE`] present).
//!
//! A split model (`…-00001-of-00003.gguf`) is pulled with all its parts. Downloads go through a
//! hub-style cache in `<models>/.downloads/` (an interrupted download resumes from there), then
//! each file's bytes are checked against the checksum the hub reports for it (the `x-linked-etag`
//! header: the sha256 of an LFS file, or the git blob sha1 of a small one). On a mismatch the
//! download is deleted and the command fails; on a match the file is moved to
//! `<models>/<file name>`. Progress goes to stderr; the paths of the pulled files go to stdout.

use crate::config;
use clap::{Parser, Subcommand};
use hf_hub::api::tokio::{Api, ApiBuilder, ApiError, Progress};
use hf_hub::{Repo, RepoType};
use sha2::Digest;
use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Short model names `pi models pull` accepts: `(name, hub repo, file in the repo)`.
pub const SHORT_NAMES: &[(&str, &str, &str)] = &[
    (
        "smollm2-135m",
        "bartowski/SmolLM2-135M-Instruct-GGUF",
        "SmolLM2-135M-Instruct-Q4_K_M.gguf",
    ),
    (
        "qwen2.5-0.5b",
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF",
        "qwen2.5-0.5b-instruct-q4_k_m.gguf",
    ),
];

/// Quantizations tried in this order when a pull names a repository but no file.
pub const QUANT_PREFERENCE: &[&str] = &[
    "Q4_K_M", "Q4_K_S", "Q4_1", "Q4_0", "Q5_K_M", "Q5_K_S", "Q6_K", "Q8_0",
];

/// Name of the download cache folder inside the models folder.
const DOWNLOADS_DIR: &str = ".downloads";

/// `pi models …` arguments.
#[derive(Debug, Parser)]
#[command(
    name = "pi models",
    bin_name = "pi models",
    about = "Manage the GGUF models of the local provider (<agent dir>/models/)"
)]
pub struct ModelsCli {
    /// What to do.
    #[command(subcommand)]
    pub command: ModelsCommand,
}

/// The `pi models` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Download a GGUF model from the Hugging Face hub into <agent dir>/models/.
    #[command(after_help = pull_after_help())]
    Pull {
        /// A short name (e.g. smollm2-135m), owner/repo/file.gguf, or owner/repo[:QUANT].
        target: String,
        /// Branch, tag or commit to download from (default: main).
        #[arg(long)]
        revision: Option<String>,
        /// Download again even when the file is already in the models folder.
        #[arg(long)]
        force: bool,
    },
    /// List the GGUF files in <agent dir>/models/.
    List,
}

fn pull_after_help() -> String {
    let mut s = String::from("Short names:\n");
    for (name, repo, file) in SHORT_NAMES {
        s.push_str(&format!("  {name:<14} {repo}/{file}\n"));
    }
    s.push_str(
        "\nExamples:\n  pi models pull smollm2-135m\n  \
         pi models pull bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_K_M.gguf\n  \
         pi models pull bartowski/SmolLM2-135M-Instruct-GGUF:Q8_0\n\n\
         $HF_ENDPOINT overrides the hub address; $HF_TOKEN authenticates (gated repositories).",
    );
    s
}

/// Runs `pi models …` with `args` (the first item is taken as the program name, so pass the
/// process arguments from `models` on). Returns the process exit code.
pub fn main<I, T>(args: I) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match ModelsCli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let models_dir = models_dir();
    match cli.command {
        ModelsCommand::List => list(&models_dir),
        ModelsCommand::Pull {
            target,
            revision,
            force,
        } => {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("Error: could not start the async runtime: {e}");
                    return 1;
                }
            };
            match runtime.block_on(pull(&target, revision.as_deref(), force, &models_dir)) {
                Ok(paths) => {
                    for p in paths {
                        println!("{}", p.display());
                    }
                    0
                }
                Err(e) => {
                    eprintln!("Error: {e}");
                    1
                }
            }
        }
    }
}

/// `<agent dir>/models`.
pub fn models_dir() -> PathBuf {
    config::agent_dir().join("models")
}

fn list(models_dir: &Path) -> i32 {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(models_dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            let p = e.path();
            p.is_file()
                && p.extension()
                    .and_then(|x| x.to_str())
                    .is_some_and(|x| x.eq_ignore_ascii_case("gguf"))
        })
        .map(|e| {
            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
            (e.file_name().to_string_lossy().into_owned(), size)
        })
        .collect();
    files.sort();
    if files.is_empty() {
        eprintln!(
            "No models in {}. Get one with: pi models pull {}",
            models_dir.display(),
            SHORT_NAMES[0].0
        );
        return 0;
    }
    for (name, size) in files {
        println!("{name}\t{}", human_bytes(size));
    }
    eprintln!("{}", runtime_defaults());
    0
}

/// What `pi models list` writes on stderr after the files (stdout stays `name\tsize` lines):
/// the local runtime's decoding threads and sampling defaults (issue 24), e.g.
/// `Local runtime: 1 decoding thread (PI_LOCAL_THREADS overrides); sampling: temperature 0.6,
/// top-k 40, top-p 0.95, min-p 0.05, repeat penalty 1.1 over 64 tokens; output cap 4096 tokens`.
#[cfg(feature = "local")]
fn runtime_defaults() -> String {
    let threads = pi_local::default_threads();
    format!(
        "Local runtime: {threads} decoding thread{} (PI_LOCAL_THREADS overrides); sampling: {}; \
         output cap {} tokens",
        if threads == 1 { "" } else { "s" },
        pi_local::SamplingConfig::default(),
        pi_local::MAX_OUTPUT_TOKENS
    )
}

/// Without the `local` feature nothing here can run the files.
#[cfg(not(feature = "local"))]
fn runtime_defaults() -> String {
    "This pi build has no local runtime (built without the `local` feature): these files \
     cannot be run by it."
        .to_string()
}

/// What a pull target names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSpec {
    /// `owner/repo` on the hub.
    pub repo: String,
    /// Revision named in the target (a `resolve/<rev>/` URL), if any.
    pub revision: Option<String>,
    /// The file, or `None` to pick one of the repository's GGUF files.
    pub file: Option<String>,
    /// `QUANT` of an `owner/repo:QUANT` target.
    pub quant: Option<String>,
}

/// Parses a pull target (see the module documentation).
pub fn parse_target(target: &str) -> Result<PullSpec, String> {
    let t = target.trim();
    if let Some((_, repo, file)) = SHORT_NAMES
        .iter()
        .find(|(name, _, _)| name.eq_ignore_ascii_case(t))
    {
        return Ok(PullSpec {
            repo: repo.to_string(),
            revision: None,
            file: Some(file.to_string()),
            quant: None,
        });
    }
    let mut rest = t;
    for prefix in [
        "https://huggingface.co/",
        "http://huggingface.co/",
        "https://hf.co/",
        "hf.co/",
        "huggingface.co/",
        "hf://",
    ] {
        if let Some(r) = rest.strip_prefix(prefix) {
            rest = r;
            break;
        }
    }
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    let unknown = || {
        let names: Vec<&str> = SHORT_NAMES.iter().map(|(n, _, _)| *n).collect();
        format!(
            "\"{target}\" is not a short model name ({}) nor a hub repository \
             (owner/repo, owner/repo:QUANT or owner/repo/file.gguf)",
            names.join(", ")
        )
    };
    if parts.len() < 2 {
        return Err(unknown());
    }
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(format!("\"{target}\": invalid path"));
    }
    let owner = parts[0];
    let (name, quant) = match parts[1].split_once(':') {
        Some((n, q)) if parts.len() == 2 && !q.is_empty() => (n, Some(q.to_string())),
        _ => (parts[1], None),
    };
    let repo = format!("{owner}/{name}");
    let mut file_parts = &parts[2..];
    let mut revision = None;
    if file_parts.len() >= 2 && matches!(file_parts[0], "resolve" | "blob") {
        revision = Some(file_parts[1].to_string());
        file_parts = &file_parts[2..];
    }
    if file_parts.is_empty() {
        return Ok(PullSpec {
            repo,
            revision,
            file: None,
            quant,
        });
    }
    let file = file_parts.join("/");
    if !is_gguf(&file) {
        return Err(format!(
            "\"{file}\" is not a .gguf file (pi runs GGUF models; name a .gguf file, \
             or just the repository to pick one)"
        ));
    }
    Ok(PullSpec {
        repo,
        revision,
        file: Some(file),
        quant,
    })
}

fn is_gguf(name: &str) -> bool {
    name.to_ascii_lowercase().ends_with(".gguf")
}

/// `(part, total)` of a split model file name (`…-00002-of-00003.gguf` → `(2, 3)`).
fn split_part(file: &str) -> Option<(u32, u32)> {
    let stem = file.get(..file.len().checked_sub(5)?)?;
    let (head, total) = stem.rsplit_once("-of-")?;
    let (_, part) = head.rsplit_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(part) && digits(total)) {
        return None;
    }
    Some((part.parse().ok()?, total.parse().ok()?))
}

/// All the files of the model `file` names: the file itself, or every part of a split model.
fn model_parts(file: &str) -> Vec<String> {
    let Some((_, total)) = split_part(file) else {
        return vec![file.to_string()];
    };
    // "<base>-0000N-of-0000M.gguf": keep the digit widths of the name.
    let stem = &file[..file.len() - 5];
    let (head, total_str) = stem.rsplit_once("-of-").unwrap_or((stem, ""));
    let (base, part_str) = head.rsplit_once('-').unwrap_or((head, ""));
    let ext = &file[file.len() - 5..];
    (1..=total)
        .map(|n| format!("{base}-{n:0pw$}-of-{total_str}{ext}", pw = part_str.len()))
        .collect()
}

/// Picks the GGUF file to pull among a repository's files.
pub fn pick_file(files: &[String], quant: Option<&str>) -> Result<String, String> {
    let candidates: Vec<&String> = files
        .iter()
        .filter(|f| is_gguf(f))
        .filter(|f| split_part(f).is_none_or(|(part, _)| part == 1))
        .collect();
    if candidates.is_empty() {
        return Err("the repository has no .gguf file".into());
    }
    let matching = |q: &str| -> Vec<&String> {
        let q = q.to_ascii_lowercase();
        candidates
            .iter()
            .copied()
            .filter(|f| quant_tokens(f).contains(&q))
            .collect()
    };
    let listing = || {
        candidates
            .iter()
            .map(|c| format!("  {c}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if let Some(q) = quant {
        let found = matching(q);
        return match found.as_slice() {
            [one] => Ok(one.to_string()),
            [] => Err(format!(
                "no .gguf file for {q}; the repository has:\n{}",
                listing()
            )),
            _ => Err(format!(
                "several .gguf files match {q}; name one as owner/repo/file.gguf:\n{}",
                listing()
            )),
        };
    }
    if let [one] = candidates.as_slice() {
        return Ok(one.to_string());
    }
    for q in QUANT_PREFERENCE {
        if let [one] = matching(q).as_slice() {
            return Ok(one.to_string());
        }
    }
    Err(format!(
        "the repository has several .gguf files; name one as owner/repo/file.gguf \
         or owner/repo:QUANT:\n{}",
        listing()
    ))
}

/// The lowercase `-`/`.`/`/`-separated tokens of a file name that could name a quantization
/// (`Model-Q4_K_M.gguf` → `["model", "q4_k_m", "gguf"]`).
fn quant_tokens(file: &str) -> Vec<String> {
    file.to_ascii_lowercase()
        .split(['-', '.', '/'])
        .map(str::to_string)
        .collect()
}

/// Downloads what `target` names into `models_dir`; returns the paths of the model's files.
pub async fn pull(
    target: &str,
    revision: Option<&str>,
    force: bool,
    models_dir: &Path,
) -> Result<Vec<PathBuf>, String> {
    let spec = parse_target(target)?;
    let revision = revision
        .map(str::to_string)
        .or(spec.revision.clone())
        .unwrap_or_else(|| "main".to_string());
    let repo = Repo::with_revision(spec.repo.clone(), RepoType::Model, revision);
    std::fs::create_dir_all(models_dir)
        .map_err(|e| format!("cannot create {}: {e}", models_dir.display()))?;
    let cache_dir = models_dir.join(DOWNLOADS_DIR);
    let mut builder = ApiBuilder::from_env()
        .with_progress(false)
        .with_cache_dir(cache_dir.clone());
    if let Some(token) = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()) {
        builder = builder.with_token(Some(token));
    }
    let api = builder
        .build()
        .map_err(|e| format!("cannot set up the hub client: {e}"))?;
    let file = match spec.file {
        Some(f) => f,
        None => {
            let info = api
                .repo(repo.clone())
                .info()
                .await
                .map_err(|e| describe(&e, &format!("the repository {}", spec.repo)))?;
            let files: Vec<String> = info.siblings.into_iter().map(|s| s.rfilename).collect();
            let picked = pick_file(&files, spec.quant.as_deref())
                .map_err(|e| format!("{}: {e}", spec.repo))?;
            eprintln!("Picked {picked} from {}", spec.repo);
            picked
        }
    };
    let mut paths = Vec::new();
    let result = async {
        for part in model_parts(&file) {
            paths.push(pull_file(&api, &repo, &part, models_dir, force).await?);
        }
        Ok::<_, String>(())
    }
    .await;
    cleanup_cache(&cache_dir, &repo);
    result.map(|()| paths)
}

/// Downloads one file of `repo` into `models_dir`, verifying its checksum.
async fn pull_file(
    api: &Api,
    repo: &Repo,
    file: &str,
    models_dir: &Path,
    force: bool,
) -> Result<PathBuf, String> {
    let name = Path::new(file)
        .file_name()
        .ok_or_else(|| format!("\"{file}\" has no file name"))?;
    let dest = models_dir.join(name);
    if dest.exists() && !force {
        eprintln!(
            "{} is already in {} (use --force to download it again)",
            name.to_string_lossy(),
            models_dir.display()
        );
        return Ok(dest);
    }
    let label = format!("{}/{file}", repo.url());
    let progress = StderrProgress::new(label.clone());
    let pointer = api
        .repo(repo.clone())
        .download_with_progress(file, progress)
        .await
        .map_err(|e| describe(&e, &label))?;
    // The cache keeps the file as `blobs/<etag>` (the pointer is a symlink to it): the etag is
    // the checksum the hub reported for the file.
    let blob = std::fs::canonicalize(&pointer).unwrap_or_else(|_| pointer.clone());
    let etag = blob
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let blob_for_hash = blob.clone();
    let verdict = tokio::task::spawn_blocking(move || {
        verify(&blob_for_hash, &etag)?;
        check_gguf_magic(&blob_for_hash)
    })
    .await
    .map_err(|e| format!("checksum task failed: {e}"))
    .and_then(|r| r);
    let _ = std::fs::remove_file(&pointer);
    if let Err(e) = verdict {
        let _ = std::fs::remove_file(&blob);
        return Err(format!("{label}: {e}; the download was deleted"));
    }
    std::fs::rename(&blob, &dest)
        .map_err(|e| format!("cannot move the download to {}: {e}", dest.display()))?;
    eprintln!("Saved {}", dest.display());
    Ok(dest)
}

/// Checks `path` against the hub's etag: 64 hex digits are a sha256 (LFS files), 40 are the
/// git blob sha1 (files kept in git itself).
fn verify(path: &Path, etag: &str) -> Result<(), String> {
    let expected = etag.trim_matches('"').to_ascii_lowercase();
    let is_hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit());
    let (kind, actual) = match expected.len() {
        64 if is_hex(&expected) => ("sha256", hash_file::<sha2::Sha256>(path, None)?),
        40 if is_hex(&expected) => {
            let len = std::fs::metadata(path)
                .map_err(|e| format!("cannot read the download: {e}"))?
                .len();
            let header = format!("blob {len}\0");
            (
                "git blob sha1",
                hash_file::<sha1::Sha1>(path, Some(header.as_bytes()))?,
            )
        }
        _ => {
            return Err(format!(
            "the hub reported no checksum for the file (etag \"{etag}\"), so it cannot be verified"
        ))
        }
    };
    if actual == expected {
        Ok(())
    } else {
        Err(format!(
            "checksum mismatch: the hub reports {kind} {expected}, the downloaded bytes have {actual}"
        ))
    }
}

/// GGUF files start with the bytes `GGUF`.
fn check_gguf_magic(path: &Path) -> Result<(), String> {
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| format!("cannot read the download: {e}"))?;
    if &magic == b"GGUF" {
        Ok(())
    } else {
        Err("the file is not a GGUF model (it does not start with \"GGUF\")".into())
    }
}

/// A hub client error in words, for `what` (a repository or a file).
fn describe(e: &ApiError, what: &str) -> String {
    match e {
        ApiError::RequestError(re) => match re.status().map(|s| s.as_u16()) {
            Some(404) => format!(
                "{what} was not found on the hub (check the repository and file names): {re}"
            ),
            Some(401 | 403) => format!(
                "the hub refused access to {what} (a gated or private repository: accept its \
                 terms on the hub and set HF_TOKEN): {re}"
            ),
            _ if re.is_connect() || re.is_timeout() => {
                format!("cannot reach the hub for {what}: {re}")
            }
            _ => format!("download of {what} failed: {re}"),
        },
        other => format!("download of {what} failed: {other}"),
    }
}

fn hash_file<D: Digest>(path: &Path, prefix: Option<&[u8]>) -> Result<String, String> {
    let mut file =
        std::fs::File::open(path).map_err(|e| format!("cannot read the download: {e}"))?;
    let mut hasher = D::new();
    if let Some(p) = prefix {
        hasher.update(p);
    }
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|e| format!("cannot read the download: {e}"))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Removes the repository's cache folder unless it holds a partial download (kept so that the
/// next pull resumes it), then the cache folder itself when empty.
fn cleanup_cache(cache_dir: &Path, repo: &Repo) {
    let repo_dir = cache_dir.join(repo.folder_name());
    let partial = std::fs::read_dir(repo_dir.join("blobs"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().ends_with(".part"));
    if !partial {
        let _ = std::fs::remove_dir_all(&repo_dir);
    }
    let _ = std::fs::remove_dir(cache_dir);
}

/// Download progress on stderr: a line redrawn in place on a terminal, else a line per 10%.
#[derive(Clone)]
struct StderrProgress {
    label: String,
    state: Arc<Mutex<ProgressState>>,
}

struct ProgressState {
    total: usize,
    done: usize,
    started: Instant,
    last_draw: Option<Instant>,
    last_decile: Option<usize>,
    tty: bool,
}

impl StderrProgress {
    fn new(label: String) -> Self {
        StderrProgress {
            label,
            state: Arc::new(Mutex::new(ProgressState {
                total: 0,
                done: 0,
                started: Instant::now(),
                last_draw: None,
                last_decile: None,
                tty: std::io::stderr().is_terminal(),
            })),
        }
    }

    fn report(&self, finished: bool) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let pct = (s.done * 100).checked_div(s.total).unwrap_or(100).min(100);
        let elapsed = s.started.elapsed().as_secs_f64().max(1e-3);
        let line = format!(
            "  {pct:>3}%  {} / {}  {}/s",
            human_bytes(s.done as u64),
            human_bytes(s.total as u64),
            human_bytes((s.done as f64 / elapsed) as u64)
        );
        let mut err = std::io::stderr().lock();
        if s.tty {
            let due = s
                .last_draw
                .is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
            if finished || due {
                let _ = write!(err, "\r{line}\x1b[K");
                if finished {
                    let _ = writeln!(err);
                }
                let _ = err.flush();
                s.last_draw = Some(Instant::now());
            }
        } else {
            let decile = pct / 10;
            if s.last_decile.is_none_or(|d| decile > d) || (finished && pct == 100) {
                if !(finished && s.last_decile == Some(10)) {
                    let _ = writeln!(err, "{line}");
                }
                s.last_decile = Some(decile);
            }
        }
    }
}

impl Progress for StderrProgress {
    async fn init(&mut self, size: usize, _filename: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.total = size;
            s.started = Instant::now();
        }
        eprintln!("Downloading {} ({})", self.label, human_bytes(size as u64));
    }

    async fn update(&mut self, size: usize) {
        if let Ok(mut s) = self.state.lock() {
            s.done += size;
        }
        self.report(false);
    }

    async fn finish(&mut self) {
        self.report(true);
    }
}

/// `1536` → `"1.5 KiB"`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_and_paths_parse() {
        let s = parse_target("smollm2-135m").unwrap();
        assert_eq!(s.repo, "bartowski/SmolLM2-135M-Instruct-GGUF");
        assert_eq!(s.file.as_deref(), Some("SmolLM2-135M-Instruct-Q4_K_M.gguf"));

        let s = parse_target("o/r/sub/m-Q4_0.gguf").unwrap();
        assert_eq!(
            (s.repo.as_str(), s.file.as_deref()),
            ("o/r", Some("sub/m-Q4_0.gguf"))
        );

        let s = parse_target("https://huggingface.co/o/r/resolve/v1/m.gguf?download=true").unwrap();
        assert_eq!(s.revision.as_deref(), Some("v1"));
        assert_eq!(s.file.as_deref(), Some("m.gguf"));

        let s = parse_target("o/r:Q8_0").unwrap();
        assert_eq!((s.file, s.quant.as_deref()), (None, Some("Q8_0")));

        assert!(parse_target("nope").is_err());
        assert!(parse_target("o/r/config.json").is_err());
        assert!(parse_target("o/r/../x.gguf").is_err());
    }

    #[test]
    fn picks_preferred_quant_and_split_parts() {
        let files: Vec<String> = ["README.md", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-Q4_K_S.gguf"]
            .map(String::from)
            .to_vec();
        assert_eq!(pick_file(&files, None).unwrap(), "m-Q4_K_M.gguf");
        assert_eq!(pick_file(&files, Some("q8_0")).unwrap(), "m-Q8_0.gguf");
        assert!(pick_file(&files, Some("Q2_K")).is_err());
        assert_eq!(
            model_parts("big-00001-of-00003.gguf"),
            [
                "big-00001-of-00003.gguf",
                "big-00002-of-00003.gguf",
                "big-00003-of-00003.gguf"
            ]
        );
        assert_eq!(model_parts("m.gguf"), ["m.gguf"]);
    }

    #[test]
    fn verifies_sha256_and_git_sha1() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello\n").unwrap();
        verify(
            &p,
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
        )
        .unwrap();
        // `git hash-object` of "hello\n".
        verify(&p, "ce013625030ba8dba906f756967f9e9ca394464a").unwrap();
        assert!(verify(&p, &"0".repeat(64)).is_err());
        assert!(verify(&p, "W/\"abc\"").is_err());
    }
}
