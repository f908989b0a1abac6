//! `pi-local`: GGUF models run in-process on the CPU through llama.cpp (`llama-cpp-2`).
//!
//! * [`LocalProvider`] implements [`pi_ai::Provider`] for the wire API [`API`]
//!   (`"local-gguf"`). It renders the conversation with the chat template stored in the GGUF
//!   metadata (`tokenizer.chat_template`, rendered with `minijinja`), decodes on a dedicated
//!   thread per model file and streams every decoded piece as a `text_delta`.
//! * [`discover_models`] lists every `*.gguf` in a folder as a [`pi_ai::Model`] of provider
//!   [`PROVIDER`] (`"local"`), id = file stem, `baseUrl` = the file's path.
//! * [`default_models_dir`] is `${PI_CODING_AGENT_DIR:-~/.pi/agent}/models`.
//!
//! Tool calls: the tools' JSON schemas go into the prompt the way the chat template lists them
//! or, when it has no tool section, in a section of our own in the system prompt that asks
//! for `<tool_call>{"name": …, "arguments": {…}}</tool_call>` blocks (the Hermes/Qwen
//! convention). Once the model writes `<tool_call>`, decoding is constrained by a grammar
//! derived from the schemas (llama.cpp's `json_schema_to_grammar`, as a lazy grammar), so each
//! call is JSON that names one of the tools; it streams as `toolcall_start`,
//! `toolcall_delta`… (argument JSON text), `toolcall_end`, with ids `call_local_<n>`, and the
//! response ends with `stopReason: "toolUse"`.
//!
//! Model settings read from the model's `compat` object in `models.json`:
//!
//! * `"toolChoice": "required"` — when the request has tools, the response is exactly one
//!   tool call, grammar-constrained from the first token (like `tool_choice: "required"` on
//!   hosted APIs). `"auto"` (the default) lets the model choose between text and tool calls.
//!
//! ```json
//! {"providers": {"my-gguf": {"api": "local-gguf", "models": [
//!   {"id": "smol-tools", "path": "~/.pi/agent/models/SmolLM2-135M-Instruct.Q4_1.gguf",
//!    "compat": {"toolChoice": "required"}}
//! ]}}}
//! ```
//!
//! A model file is loaded once per process and kept (with its llama.cpp context and KV cache)
//! by a worker thread; requests for the same file queue on that thread. A follow-up request
//! whose prompt starts with the tokens already in the KV cache only evaluates the new suffix
//! (reported as `usage.cacheRead`); [`LocalConfig::prefix_cache`] turns this off.

#![warn(missing_docs)]

mod discover;
mod engine;
mod events;
mod template;
mod tools;

use pi_ai::{AssistantStream, Context, Model, Provider, StreamOptions};
use std::path::{Path, PathBuf};

pub use discover::{default_models_dir, discover_models, GgufInfo};
pub use template::{chat_messages, render_chatml, render_jinja, ChatTemplateInput};

/// The `api` value of local GGUF models (`model.api`).
pub const API: &str = "local-gguf";

/// The `provider` value of models found by [`discover_models`].
pub const PROVIDER: &str = "local";

/// Context window used when a GGUF file does not state `<arch>.context_length`, in tokens.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 8192;

/// Upper bound on the context window advertised for a discovered model, in tokens. The KV
/// cache is allocated for the whole window, so a model trained for 128k tokens would otherwise
/// need gigabytes of RAM before answering anything.
pub const MAX_CONTEXT_WINDOW: u64 = 32_768;

/// Upper bound on `maxTokens` (output tokens per response) of a discovered model.
pub const MAX_OUTPUT_TOKENS: u64 = 4096;

/// Sampling settings applied to every response of a [`LocalProvider`].
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingConfig {
    /// Softmax temperature; `<= 0.0` means greedy decoding (always the most likely token).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (`<= 0` disables the filter).
    pub top_k: i32,
    /// Nucleus sampling: keep the smallest set of tokens whose probability sums to `top_p`
    /// (`1.0` disables the filter).
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` × the top token's (`0.0` disables it).
    pub min_p: f32,
    /// RNG seed; `None` picks a fresh one per response.
    pub seed: Option<u32>,
    /// Repetition penalty on the logits of tokens among the last [`Self::repeat_last_n`]
    /// generated ones (llama.cpp's `penalty_repeat`; `1.0` disables it). Not applied in greedy
    /// decoding, which stays exactly the model's most likely continuation.
    pub repeat_penalty: f32,
    /// How many of the most recent generated tokens the repetition penalty looks at, in tokens
    /// (`0` disables it).
    pub repeat_last_n: i32,
}

impl Default for SamplingConfig {
    /// llama.cpp's defaults, with a slightly lower temperature and a mild repetition penalty
    /// over the last 64 tokens (small models ramble and fall into loops; issue 24: the default
    /// 135M model once repeated itself up to the 4,096-token output cap on `Say hello`).
    fn default() -> Self {
        SamplingConfig {
            temperature: 0.6,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed: None,
            repeat_penalty: 1.1,
            repeat_last_n: 64,
        }
    }
}

impl std::fmt::Display for SamplingConfig {
    /// One line for `pi models list`:
    /// `temperature 0.6, top-k 40, top-p 0.95, min-p 0.05, repeat penalty 1.1 over 64 tokens`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.temperature.is_finite() || self.temperature <= 0.0 {
            return f.write_str("greedy");
        }
        write!(
            f,
            "temperature {}, top-k {}, top-p {}, min-p {}, repeat penalty {} over {} tokens",
            self.temperature,
            self.top_k,
            self.top_p,
            self.min_p,
            self.repeat_penalty,
            self.repeat_last_n
        )
    }
}

impl SamplingConfig {
    /// Greedy decoding: deterministic output for a given prompt and model file.
    pub fn greedy() -> Self {
        SamplingConfig {
            temperature: 0.0,
            ..SamplingConfig::default()
        }
    }
}

/// Decoding threads when neither [`LocalConfig::threads`] nor a request sets them: env
/// `PI_LOCAL_THREADS` (a positive integer), else one fewer than the cores this process may use
/// (`std::thread::available_parallelism`), at least 1.
///
/// Why one fewer (issue 24, measured in bench/README.md): llama.cpp's CPU threads meet at a
/// spinning barrier after every operation, so one thread that another process preempts stalls
/// all the others. With every core taken, the default model fell from 57 to ~9 tokens/s when a
/// second busy process ran; a free core keeps the threads scheduled.
pub fn default_threads() -> u32 {
    let from_env = std::env::var("PI_LOCAL_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|&n| n > 0);
    from_env.unwrap_or_else(|| {
        let cores = std::thread::available_parallelism()
            .map(|n| u32::try_from(n.get()).unwrap_or(4))
            .unwrap_or(4);
        cores.saturating_sub(1).max(1)
    })
}

/// Runtime settings of a [`LocalProvider`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// Where bare model ids are looked up as `<models_dir>/<id>.gguf` (when `model.baseUrl`
    /// does not name the file). Default: [`default_models_dir`].
    pub models_dir: Option<PathBuf>,
    /// CPU threads used for decoding; `None` = [`default_threads`] (env `PI_LOCAL_THREADS`,
    /// else one fewer than the cores this process may use, at least 1).
    pub threads: Option<u32>,
    /// Sampling settings.
    pub sampling: SamplingConfig,
    /// Keep the KV cache between requests (default `true`): a prompt that starts with the
    /// tokens already evaluated only evaluates the rest. `false` evaluates every prompt of
    /// this provider in full (and drops what the cache held), e.g. to measure what the cache
    /// saves (`crates/coding-agent/examples/local_bench.rs`).
    pub prefix_cache: bool,
    /// Diagnostics: write each prompt this provider renders (the exact text that is then
    /// tokenized) to this file, replacing its contents. Default `None`.
    pub dump_prompt: Option<PathBuf>,
}

impl Default for LocalConfig {
    fn default() -> Self {
        LocalConfig {
            models_dir: default_models_dir(),
            threads: None,
            sampling: SamplingConfig::default(),
            prefix_cache: true,
            dump_prompt: None,
        }
    }
}

/// The in-process GGUF provider (`api: "local-gguf"`).
///
/// Cheap to construct and clone: loaded models live in a process-wide cache keyed by the
/// canonical file path, shared by every `LocalProvider`.
#[derive(Debug, Clone, Default)]
pub struct LocalProvider {
    config: LocalConfig,
}

impl LocalProvider {
    /// A provider with [`LocalConfig::default`] (models in [`default_models_dir`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// A provider with explicit settings.
    pub fn with_config(config: LocalConfig) -> Self {
        LocalProvider { config }
    }

    /// The settings in use.
    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// The GGUF file a model refers to: `model.baseUrl` when it names a file (a plain path or
    /// a `file://` URL), else `<models_dir>/<model.id>.gguf`. `None` when neither is known.
    /// The file is not required to exist.
    pub fn model_path(&self, model: &Model) -> Option<PathBuf> {
        model_path(model, self.config.models_dir.as_deref())
    }
}

/// See [`LocalProvider::model_path`].
fn model_path(model: &Model, models_dir: Option<&Path>) -> Option<PathBuf> {
    let base = model.base_url.trim();
    let base = base.strip_prefix("file://").unwrap_or(base);
    if !base.is_empty() && !base.contains("://") {
        return Some(PathBuf::from(base));
    }
    if model.id.is_empty() {
        return None;
    }
    let file = if model.id.to_ascii_lowercase().ends_with(".gguf") {
        model.id.clone()
    } else {
        format!("{}.gguf", model.id)
    };
    models_dir.map(|dir| dir.join(file))
}

impl Provider for LocalProvider {
    fn api(&self) -> &'static str {
        API
    }

    fn stream(&self, model: &Model, context: &Context, options: StreamOptions) -> AssistantStream {
        let (reply, stream) = events::Reply::channel(model);
        let Some(path) = self.model_path(model) else {
            reply.fail(
                false,
                format!(
                    "No GGUF file for local model \"{}\": set its baseUrl to the file path or \
                     put {}.gguf in the models folder",
                    model.id, model.id
                ),
            );
            return stream;
        };
        if !path.is_file() {
            reply.fail(
                false,
                format!(
                    "Local model file not found: {}. Put a .gguf file there (scripts/\
                     fetch-default-model.sh fetches the default SmolLM2-135M-Instruct).",
                    path.display()
                ),
            );
            return stream;
        }
        let job = engine::Job {
            context: context.clone(),
            max_tokens: effective_max_tokens(model, &options),
            context_window: model.context_window,
            cancel: options.cancel,
            threads: self.config.threads,
            sampling: self.config.sampling.clone(),
            prefix_cache: self.config.prefix_cache,
            dump_prompt: self.config.dump_prompt.clone(),
            tool_choice: tools::ToolChoice::of(model),
            reply,
        };
        engine::submit(&path, job);
        stream
    }
}

/// Output-token cap: the caller's value, else `min(model.maxTokens, 32000)` (32000 when the
/// model states none), as for the hosted providers. The engine further caps it to the room
/// left in the context window.
fn effective_max_tokens(model: &Model, options: &StreamOptions) -> u64 {
    match options.max_tokens {
        Some(n) if n > 0 => n,
        _ if model.max_tokens == 0 => 32_000,
        _ => model.max_tokens.min(32_000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(id: &str, base_url: &str) -> Model {
        Model {
            id: id.into(),
            name: id.into(),
            api: API.into(),
            provider: PROVIDER.into(),
            base_url: base_url.into(),
            reasoning: false,
            thinking_level_map: None,
            input: vec!["text".into()],
            input_limits: None,
            cost: Default::default(),
            context_window: 8192,
            max_tokens: 4096,
            headers: None,
            compat: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn model_path_prefers_base_url() {
        let dir = Path::new("/models");
        assert_eq!(
            model_path(&model("a", "/x/y.gguf"), Some(dir)),
            Some(PathBuf::from("/x/y.gguf"))
        );
        assert_eq!(
            model_path(&model("a", "file:///x/y.gguf"), Some(dir)),
            Some(PathBuf::from("/x/y.gguf"))
        );
        assert_eq!(
            model_path(&model("a", ""), Some(dir)),
            Some(PathBuf::from("/models/a.gguf"))
        );
        assert_eq!(
            model_path(&model("a.gguf", "http://h"), Some(dir)),
            Some(PathBuf::from("/models/a.gguf"))
        );
        assert_eq!(model_path(&model("a", ""), None), None);
    }

    #[test]
    fn max_tokens_default() {
        let m = model("a", "");
        let mut o = StreamOptions::default();
        assert_eq!(effective_max_tokens(&m, &o), 4096);
        o.max_tokens = Some(7);
        assert_eq!(effective_max_tokens(&m, &o), 7);
    }

    #[tokio::test]
    async fn missing_file_is_an_error_event() {
        use futures::StreamExt;
        let p = LocalProvider::with_config(LocalConfig {
            models_dir: Some(PathBuf::from("/nonexistent-pi-local")),
            ..LocalConfig::default()
        });
        let events: Vec<_> = p
            .stream(
                &model("nope", ""),
                &Context::default(),
                StreamOptions::default(),
            )
            .collect()
            .await;
        assert_eq!(events.len(), 1);
        match &events[0] {
            pi_ai::AssistantMessageEvent::Error { reason, message } => {
                assert_eq!(*reason, pi_ai::StopReason::Error);
                assert!(message
                    .error_message
                    .as_deref()
                    .unwrap_or("")
                    .contains("not found"));
            }
            e => panic!("unexpected {e:?}"),
        }
    }
}
