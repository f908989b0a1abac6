//! Finding GGUF files and reading the little metadata the model list needs.

use crate::{API, DEFAULT_CONTEXT_WINDOW, MAX_CONTEXT_WINDOW, MAX_OUTPUT_TOKENS, PROVIDER};
use llama_cpp_2::gguf::GgufContext;
use pi_ai::{Model, ModelCost};
use std::path::{Path, PathBuf};

/// `<agent dir>/models`: `$PI_CODING_AGENT_DIR/models` when that is set (a leading `~` is
/// expanded), else `$HOME/.pi/agent/models`. `None` when neither variable is set.
pub fn default_models_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match std::env::var("PI_CODING_AGENT_DIR") {
        Ok(dir) if !dir.is_empty() => {
            let dir = if dir == "~" {
                home?
            } else if let Some(rest) = dir.strip_prefix("~/") {
                home?.join(rest)
            } else {
                PathBuf::from(dir)
            };
            Some(dir.join("models"))
        }
        _ => home.map(|h| h.join(".pi").join("agent").join("models")),
    }
}

/// What [`GgufInfo::read`] takes from a GGUF header (tensor data is not read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GgufInfo {
    /// `general.architecture`, e.g. `"llama"`.
    pub architecture: Option<String>,
    /// `general.name`, e.g. `"SmolLM2 135M Instruct"`.
    pub name: Option<String>,
    /// `<architecture>.context_length`: the context the model was trained for, in tokens.
    pub context_length: Option<u64>,
    /// Whether `tokenizer.chat_template` is present.
    pub has_chat_template: bool,
}

// GGUF value type codes (GGUF file format specification, `gguf_type`).
const GGUF_TYPE_UINT32: u32 = 4;
const GGUF_TYPE_INT32: u32 = 5;
const GGUF_TYPE_STRING: u32 = 8;
const GGUF_TYPE_UINT64: u32 = 10;

impl GgufInfo {
    /// Parses the metadata header of the GGUF file at `path` (milliseconds: the vocabulary is
    /// parsed, the weights are not). `None` when it is not a readable GGUF file.
    pub fn read(path: &Path) -> Option<GgufInfo> {
        crate::engine::route_logs();
        let ctx = GgufContext::from_file(path)?;
        let string = |key: &str| -> Option<String> {
            let idx = ctx.find_key(key);
            (idx >= 0 && type_code(&ctx, idx) == GGUF_TYPE_STRING)
                .then(|| ctx.val_str(idx).map(str::to_owned))
                .flatten()
        };
        let integer = |key: &str| -> Option<u64> {
            let idx = ctx.find_key(key);
            if idx < 0 {
                return None;
            }
            match type_code(&ctx, idx) {
                GGUF_TYPE_UINT32 => Some(u64::from(ctx.val_u32(idx))),
                GGUF_TYPE_INT32 => u64::try_from(ctx.val_i32(idx)).ok(),
                GGUF_TYPE_UINT64 => Some(ctx.val_u64(idx)),
                _ => None,
            }
        };
        let architecture = string("general.architecture");
        let context_length = architecture
            .as_deref()
            .and_then(|a| integer(&format!("{a}.context_length")));
        Some(GgufInfo {
            name: string("general.name"),
            context_length,
            has_chat_template: ctx.find_key("tokenizer.chat_template") >= 0,
            architecture,
        })
    }
}

fn type_code(ctx: &GgufContext, idx: i64) -> u32 {
    #[allow(clippy::unnecessary_cast)]
    {
        ctx.kv_type(idx) as u32
    }
}

/// Lists every `*.gguf` file directly in `models_dir` (sorted by file name) as a model of
/// provider `"local"`, api `"local-gguf"`:
///
/// * `id`: the file stem (`SmolLM2-135M-Instruct.Q4_1`); `name`: `general.name` from the
///   metadata, else the stem;
/// * `baseUrl`: the file's path (how [`crate::LocalProvider`] finds it);
/// * `contextWindow`: `<arch>.context_length` from the metadata, capped at
///   [`crate::MAX_CONTEXT_WINDOW`]; [`crate::DEFAULT_CONTEXT_WINDOW`] when absent;
/// * `maxTokens`: `min(contextWindow, MAX_OUTPUT_TOKENS)`; cost zero; input `["text"]`;
///   `reasoning: false`.
///
/// Unreadable folders give an empty list; files that are not valid GGUF are skipped; the
/// second and later parts of a split model (`-00002-of-00003.gguf`) are skipped.
pub fn discover_models(models_dir: &Path) -> Vec<Model> {
    let Ok(entries) = std::fs::read_dir(models_dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
                && p.is_file()
        })
        .filter(|p| !is_later_split_part(p))
        .collect();
    files.sort();
    files.iter().filter_map(|p| model_for_file(p)).collect()
}

/// `…-0000N-of-0000M.gguf` with N > 1.
fn is_later_split_part(path: &Path) -> bool {
    let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
        return false;
    };
    let Some((head, total)) = stem.rsplit_once("-of-") else {
        return false;
    };
    let Some((_, part)) = head.rsplit_once('-') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(part) && digits(total) && part.parse::<u64>().is_ok_and(|n| n > 1)
}

fn model_for_file(path: &Path) -> Option<Model> {
    let id = path.file_stem()?.to_str()?.to_owned();
    let info = GgufInfo::read(path)?;
    let context_window = info
        .context_length
        .filter(|&n| n > 0)
        .map_or(DEFAULT_CONTEXT_WINDOW, |n| n.min(MAX_CONTEXT_WINDOW));
    Some(Model {
        name: info
            .name
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| id.clone()),
        id,
        api: API.into(),
        provider: PROVIDER.into(),
        base_url: path.to_string_lossy().into_owned(),
        reasoning: false,
        thinking_level_map: None,
        input: vec!["text".into()],
        input_limits: None,
        cost: ModelCost::default(),
        context_window,
        max_tokens: context_window.min(MAX_OUTPUT_TOKENS),
        headers: None,
        compat: None,
        extra: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parts() {
        assert!(!is_later_split_part(Path::new("m-00001-of-00003.gguf")));
        assert!(is_later_split_part(Path::new("m-00002-of-00003.gguf")));
        assert!(!is_later_split_part(Path::new("m.gguf")));
        assert!(!is_later_split_part(Path::new("a-of-b.gguf")));
    }

    #[test]
    fn missing_dir_and_junk_files() {
        assert!(discover_models(Path::new("/nonexistent-pi-local-dir")).is_empty());
        let dir = std::env::temp_dir().join(format!("pi-local-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("junk.gguf"), b"not a gguf").unwrap();
        std::fs::write(dir.join("notes.txt"), b"x").unwrap();
        assert!(discover_models(&dir).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
