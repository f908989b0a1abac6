//! The llama.cpp side: one worker thread per model file, which loads the model once, keeps a
//! context (and its KV cache) and serves queued requests one at a time.
//!
//! Nothing here runs on the async runtime: [`submit`] only queues a [`Job`]; the worker
//! streams events through the job's [`Reply`] channel.

use crate::events::{Reply, TokenCounts, Utf8Stream};
use crate::template::{chat_messages, render_chatml, render_jinja, ChatTemplateInput};
use crate::{SamplingConfig, DEFAULT_CONTEXT_WINDOW};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use pi_ai::{Context, StopReason};
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, OnceLock, PoisonError};
use tokio_util::sync::CancellationToken;

/// Tokens evaluated per `llama_decode` call while reading the prompt.
const BATCH_SIZE: usize = 512;

/// Smallest context a worker allocates, in tokens.
const MIN_CONTEXT: u32 = 256;

/// One request for a worker.
pub(crate) struct Job {
    /// The conversation (system prompt, messages, tools).
    pub context: Context,
    /// Output-token cap (further capped by the room left in the context).
    pub max_tokens: u64,
    /// `model.contextWindow`: context size to allocate, in tokens (0: default; capped at the
    /// model's training context).
    pub context_window: u64,
    /// Abort signal, checked before every token.
    pub cancel: CancellationToken,
    /// Decoding threads (`None`: env `PI_LOCAL_THREADS`, else all cores).
    pub threads: Option<u32>,
    /// Sampling settings.
    pub sampling: SamplingConfig,
    /// Where the events go.
    pub reply: Reply,
}

/// Route llama.cpp's and ggml's log lines to `tracing` instead of stderr (once per process).
pub(crate) fn route_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default()));
}

/// The process-wide llama.cpp backend (initialised once).
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            route_logs();
            LlamaBackend::init().map_err(|e| format!("llama.cpp backend: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Queue senders of the running workers, by canonical model path.
fn workers() -> &'static Mutex<HashMap<PathBuf, Sender<Job>>> {
    static WORKERS: OnceLock<Mutex<HashMap<PathBuf, Sender<Job>>>> = OnceLock::new();
    WORKERS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Queue `job` on the worker for the model at `path`, starting the worker (which loads the
/// model) when there is none or the previous one has stopped. Never blocks on decoding.
pub(crate) fn submit(path: &Path, job: Job) {
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut map = workers().lock().unwrap_or_else(PoisonError::into_inner);
    let job = match map.get(&key) {
        Some(tx) => match tx.send(job) {
            Ok(()) => return,
            // The worker stopped (model failed to load); start a new one.
            Err(err) => err.0,
        },
        None => job,
    };
    let (tx, rx) = channel();
    let name = format!(
        "pi-local:{}",
        key.file_stem().and_then(|s| s.to_str()).unwrap_or("model")
    );
    let worker_path = key.clone();
    let spawned = std::thread::Builder::new()
        .name(name)
        .spawn(move || worker_main(&worker_path, &rx));
    match spawned {
        Ok(_) => {
            // A fresh channel: the receiver is alive, so this cannot fail; if it somehow
            // does, dropping the job's reply still ends its stream with an error.
            let _ = tx.send(job);
            map.insert(key, tx);
        }
        Err(e) => job.reply.fail(
            false,
            format!("Could not start the local model thread: {e}"),
        ),
    }
}

/// A loaded model and what prompt rendering needs from it.
struct Loaded {
    model: LlamaModel,
    /// `tokenizer.chat_template` (Jinja).
    template: Option<String>,
    bos_text: String,
    eos_text: String,
}

/// A context and the tokens its KV cache (sequence 0) holds, in order.
struct Session<'m> {
    ctx: LlamaContext<'m>,
    n_ctx: u32,
    threads: i32,
    cached: Vec<LlamaToken>,
}

fn worker_main(path: &Path, rx: &Receiver<Job>) {
    let loaded = match backend().and_then(|b| load(b, path)) {
        Ok(l) => l,
        Err(e) => {
            // Fail what is queued; jobs sent after the receiver is gone get a respawn.
            while let Ok(job) = rx.try_recv() {
                job.reply.fail(false, e.clone());
            }
            return;
        }
    };
    let Ok(backend) = backend() else { return };
    let mut session: Option<Session<'_>> = None;
    while let Ok(job) = rx.recv() {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_job(backend, &loaded, &mut session, job);
        }));
        if outcome.is_err() {
            // The job's reply was dropped while unwinding (its stream got an error); the
            // context may be inconsistent, so start over with a fresh one.
            session = None;
        }
    }
}

fn load(backend: &LlamaBackend, path: &Path) -> Result<Loaded, String> {
    let started = std::time::Instant::now();
    let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .map_err(|e| format!("Could not load GGUF model {}: {e}", path.display()))?;
    let template = model
        .chat_template(None)
        .ok()
        .and_then(|t| t.to_string().ok())
        .or_else(|| model.meta_val_str("tokenizer.chat_template").ok())
        .filter(|t| !t.trim().is_empty());
    let (bos_text, eos_text) = {
        let vocab = model.vocab();
        let piece = |t: LlamaToken| {
            String::from_utf8_lossy(&vocab.token_to_piece(t, true, None)).into_owned()
        };
        (piece(vocab.bos()), piece(vocab.eos()))
    };
    tracing::info!(
        path = %path.display(),
        ms = started.elapsed().as_millis() as u64,
        has_template = template.is_some(),
        "local model loaded"
    );
    Ok(Loaded {
        model,
        template,
        bos_text,
        eos_text,
    })
}

fn thread_count(requested: Option<u32>) -> i32 {
    let from_env = || {
        std::env::var("PI_LOCAL_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let n = requested
        .or_else(from_env)
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(4))
                .unwrap_or(4)
        });
    i32::try_from(n.min(512)).unwrap_or(4)
}

/// The prompt text: the GGUF's Jinja template, else llama.cpp's built-in template matcher on
/// the same template, else ChatML.
fn render_prompt(loaded: &Loaded, context: &Context) -> String {
    let messages = chat_messages(&context.system_prompt, &context.messages);
    if let Some(template) = &loaded.template {
        let input = ChatTemplateInput {
            messages: &messages,
            tools: &context.tools,
            bos_token: &loaded.bos_text,
            eos_token: &loaded.eos_text,
            add_generation_prompt: true,
        };
        match render_jinja(template, &input) {
            Ok(prompt) => return prompt,
            Err(e) => tracing::warn!("{e}; falling back to llama.cpp's template matcher"),
        }
        if let Some(prompt) = render_builtin(loaded, &messages) {
            return prompt;
        }
    }
    render_chatml(&messages, true)
}

/// llama.cpp's `llama_chat_apply_template` (recognises common template families).
fn render_builtin(loaded: &Loaded, messages: &[serde_json::Value]) -> Option<String> {
    let template = loaded.model.chat_template(None).ok()?;
    let chat = messages
        .iter()
        .map(|m| {
            let role = m.get("role").and_then(|v| v.as_str()).unwrap_or("user");
            let content = m.get("content").and_then(|v| v.as_str()).unwrap_or("");
            LlamaChatMessage::new(role.to_owned(), content.to_owned()).ok()
        })
        .collect::<Option<Vec<_>>>()?;
    loaded
        .model
        .apply_chat_template(&template, &chat, true)
        .ok()
}

fn build_sampler(s: &SamplingConfig) -> LlamaSampler {
    // NaN or infinite temperatures also mean greedy.
    if !s.temperature.is_finite() || s.temperature <= 0.0 {
        return LlamaSampler::greedy();
    }
    let seed = s.seed.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
            .unwrap_or(0);
        nanos ^ std::process::id()
    });
    let mut chain = Vec::new();
    if s.top_k > 0 {
        chain.push(LlamaSampler::top_k(s.top_k));
    }
    if s.top_p > 0.0 && s.top_p < 1.0 {
        chain.push(LlamaSampler::top_p(s.top_p, 1));
    }
    if s.min_p > 0.0 && s.min_p < 1.0 {
        chain.push(LlamaSampler::min_p(s.min_p, 1));
    }
    chain.push(LlamaSampler::temp(s.temperature));
    chain.push(LlamaSampler::dist(seed));
    LlamaSampler::chain_simple(chain)
}

/// Make `session` a context of `n_ctx` tokens and `threads` threads.
fn ensure_session<'m>(
    backend: &LlamaBackend,
    loaded: &'m Loaded,
    session: &mut Option<Session<'m>>,
    n_ctx: u32,
    threads: i32,
) -> Result<(), String> {
    if session
        .as_ref()
        .is_some_and(|s| s.n_ctx == n_ctx && s.threads == threads)
    {
        return Ok(());
    }
    *session = None;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(BATCH_SIZE as u32)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let ctx = loaded
        .model
        .new_context(backend, params)
        .map_err(|e| format!("Could not create a llama.cpp context of {n_ctx} tokens: {e}"))?;
    *session = Some(Session {
        ctx,
        n_ctx,
        threads,
        cached: Vec::new(),
    });
    Ok(())
}

fn run_job<'m>(
    backend: &LlamaBackend,
    loaded: &'m Loaded,
    session: &mut Option<Session<'m>>,
    job: Job,
) {
    let Job {
        context,
        max_tokens,
        context_window,
        cancel,
        threads,
        sampling,
        mut reply,
    } = job;
    if reply.is_closed() {
        return;
    }
    if cancel.is_cancelled() {
        reply.aborted(None);
        return;
    }

    let prompt = render_prompt(loaded, &context);
    let vocab = loaded.model.vocab();
    let add_special = loaded.bos_text.is_empty() || !prompt.starts_with(&loaded.bos_text);
    let tokens = vocab.tokenize(prompt.as_bytes(), add_special, true);
    if tokens.is_empty() {
        reply.fail(false, "The prompt rendered to no tokens");
        return;
    }

    let train_ctx = loaded.model.n_ctx_train();
    let wanted = if context_window == 0 {
        DEFAULT_CONTEXT_WINDOW
    } else {
        context_window
    };
    let mut n_ctx = u32::try_from(wanted).unwrap_or(u32::MAX);
    if train_ctx > 0 {
        n_ctx = n_ctx.min(train_ctx);
    }
    let n_ctx = n_ctx.max(MIN_CONTEXT);
    if tokens.len() >= n_ctx as usize {
        reply.fail(
            false,
            format!(
                "prompt is too long: {} tokens exceed the context window of {} tokens",
                tokens.len(),
                n_ctx
            ),
        );
        return;
    }
    if let Err(e) = ensure_session(backend, loaded, session, n_ctx, thread_count(threads)) {
        reply.fail(false, e);
        return;
    }
    let Some(s) = session.as_mut() else {
        reply.fail(false, "No llama.cpp context");
        return;
    };
    reply.start();

    // Re-use the longest prefix already in the KV cache; at least one token is evaluated so
    // that there are logits to sample from.
    let mut reuse = s
        .cached
        .iter()
        .zip(&tokens)
        .take_while(|(a, b)| a == b)
        .count()
        .min(tokens.len() - 1);
    if reuse < s.cached.len() {
        let from = u32::try_from(reuse).unwrap_or(0);
        if s.ctx.kv_cache_seq_rm(0, Some(from), None).is_err() {
            s.ctx.clear_kv_cache();
            reuse = 0;
        }
        s.cached.truncate(reuse);
    }

    let mut counts = TokenCounts {
        evaluated: 0,
        reused: reuse as u64,
        generated: 0,
    };
    let mut batch = LlamaBatch::new(BATCH_SIZE, 1);
    let to_eval = &tokens[reuse..];
    let last_chunk = to_eval.len().saturating_sub(1) / BATCH_SIZE;
    for (chunk_no, chunk) in to_eval.chunks(BATCH_SIZE).enumerate() {
        if cancel.is_cancelled() || reply.is_closed() {
            reply.aborted(Some(counts));
            return;
        }
        batch.clear();
        let base = reuse + chunk_no * BATCH_SIZE;
        for (i, &tok) in chunk.iter().enumerate() {
            let is_last = chunk_no == last_chunk && i + 1 == chunk.len();
            let pos = i32::try_from(base + i).unwrap_or(i32::MAX);
            if let Err(e) = batch.add(tok, pos, &[0], is_last) {
                reply.fail_counted(false, format!("llama.cpp batch: {e}"), counts);
                return;
            }
        }
        if let Err(e) = s.ctx.decode(&mut batch) {
            reset(s);
            reply.fail_counted(false, format!("llama.cpp decode failed: {e}"), counts);
            return;
        }
        s.cached.extend_from_slice(chunk);
        counts.evaluated += chunk.len() as u64;
    }

    let room = u64::from(n_ctx).saturating_sub(tokens.len() as u64);
    let max_new = max_tokens.min(room);
    let mut sampler = build_sampler(&sampling);
    let mut utf8 = Utf8Stream::default();
    let mut logits_index = batch.n_tokens() - 1;
    let reason = loop {
        if cancel.is_cancelled() {
            let tail = utf8.finish();
            reply.text(&tail);
            reply.aborted(Some(counts));
            return;
        }
        if counts.generated >= max_new {
            break StopReason::Length;
        }
        let token = sampler.sample(&s.ctx, logits_index);
        if vocab.is_eog(token) {
            break StopReason::Stop;
        }
        counts.generated += 1;
        let text = utf8.push(&vocab.token_to_piece(token, false, None));
        if !reply.text(&text) {
            // The consumer dropped the stream: stop quietly.
            return;
        }
        batch.clear();
        let pos = i32::try_from(s.cached.len()).unwrap_or(i32::MAX);
        if let Err(e) = batch.add(token, pos, &[0], true) {
            reply.fail_counted(false, format!("llama.cpp batch: {e}"), counts);
            return;
        }
        if let Err(e) = s.ctx.decode(&mut batch) {
            reset(s);
            reply.fail_counted(false, format!("llama.cpp decode failed: {e}"), counts);
            return;
        }
        s.cached.push(token);
        logits_index = 0;
    };
    let tail = utf8.finish();
    reply.text(&tail);
    reply.finish(reason, counts);
}

/// Forget the KV cache after a failed decode.
fn reset(s: &mut Session<'_>) {
    s.ctx.clear_kv_cache();
    s.cached.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads() {
        assert_eq!(thread_count(Some(3)), 3);
        assert!(thread_count(None) >= 1);
    }
}
