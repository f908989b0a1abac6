//! The llama.cpp side: one worker thread per model file, which loads the model once, keeps a
//! context (and its KV cache) and serves queued requests one at a time.
//!
//! Nothing here runs on the async runtime: [`submit`] only queues a [`Job`]; the worker
//! streams events through the job's [`Reply`] channel.

use crate::events::{Reply, TokenCounts, Utf8Stream};
use crate::template::{chat_messages, render_chatml, render_jinja, ChatTemplateInput};
use crate::tools::{self, CallParser, Piece, ToolChoice};
use crate::{SamplingConfig, DEFAULT_CONTEXT_WINDOW};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use pi_ai::{Context, Message, StopReason, ToolDefinition};
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
    /// Decoding threads (`None`: [`crate::default_threads`]).
    pub threads: Option<u32>,
    /// Sampling settings.
    pub sampling: SamplingConfig,
    /// Re-use the evaluated prefix in the KV cache (`LocalConfig::prefix_cache`).
    pub prefix_cache: bool,
    /// Write the rendered prompt here (`LocalConfig::dump_prompt`).
    pub dump_prompt: Option<PathBuf>,
    /// Whether the response must be a tool call (`compat.toolChoice`).
    pub tool_choice: ToolChoice,
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
    let n = requested
        .filter(|&n| n > 0)
        .unwrap_or_else(crate::default_threads);
    i32::try_from(n.min(512)).unwrap_or(4)
}

/// The prompt text: the GGUF's Jinja template ([`template_prompt`]), else llama.cpp's built-in
/// template matcher on the same template, else ChatML.
fn render_prompt(loaded: &Loaded, context: &Context, choice: ToolChoice) -> String {
    let template = TemplateInfo {
        source: loaded.template.as_deref(),
        bos: &loaded.bos_text,
        eos: &loaded.eos_text,
    };
    match template_prompt(&template, context, choice) {
        Ok(prompt) => prompt,
        Err(messages) => {
            if loaded.template.is_some() {
                tracing::warn!("falling back to llama.cpp's template matcher");
                if let Some(prompt) = render_builtin(loaded, &messages) {
                    return prompt;
                }
            }
            render_chatml(&messages, true)
        }
    }
}

/// What [`template_prompt`] needs from a model.
struct TemplateInfo<'a> {
    /// The Jinja chat template, if the model has one.
    source: Option<&'a str>,
    bos: &'a str,
    eos: &'a str,
}

/// The prompt rendered with the model's Jinja template, or (`Err`) the chat messages to render
/// some other way when there is no template or it fails.
///
/// With tools: a template that renders them (its output changes when `tools` is passed) lists
/// them itself; when it does not use `<tool_call>` blocks, the system prompt also gets our
/// calling convention ([`tools::call_instructions`]). Otherwise the system prompt gets our
/// tool section ([`tools::tool_section`]) and the conversation's earlier tool calls and
/// results are written as text in that convention ([`tools::calls_as_text`]).
fn template_prompt(
    template: &TemplateInfo<'_>,
    context: &Context,
    choice: ToolChoice,
) -> Result<String, Vec<serde_json::Value>> {
    let render = |system: &str, tools: &[ToolDefinition], as_text: bool| {
        let mut messages = chat_messages(system, &context.messages);
        if as_text {
            messages = tools::calls_as_text(messages);
        }
        let prompt = template.source.and_then(|source| {
            let input = ChatTemplateInput {
                messages: &messages,
                tools,
                bos_token: template.bos,
                eos_token: template.eos,
                add_generation_prompt: true,
            };
            render_jinja(source, &input)
                .map_err(|e| tracing::warn!("{e}"))
                .ok()
        });
        (prompt, messages)
    };
    let system = &context.system_prompt;
    let tools = &context.tools;
    if !tools.is_empty() && template.source.is_some() {
        if let ((Some(with), _), (Some(without), _)) =
            (render(system, tools, false), render(system, &[], false))
        {
            if with != without {
                if template.source.is_some_and(|t| t.contains(tools::OPEN)) {
                    return Ok(with);
                }
                let system = tools::append_section(system, &tools::call_instructions(choice));
                if let (Some(prompt), _) = render(&system, tools, false) {
                    return Ok(prompt);
                }
            }
        }
    }
    let (system, as_text) = if tools.is_empty() {
        (system.clone(), false)
    } else {
        (
            tools::append_section(system, &tools::tool_section(tools, choice)),
            true,
        )
    };
    match render(&system, &[], as_text) {
        (Some(prompt), _) => Ok(prompt),
        (None, messages) => Err(messages),
    }
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

/// The sampler chain for `s`, with `grammar` (a tool-call grammar) first when given.
fn build_sampler(s: &SamplingConfig, n_vocab: i32, grammar: Option<LlamaSampler>) -> LlamaSampler {
    let mut chain: Vec<LlamaSampler> = grammar.into_iter().collect();
    // NaN or infinite temperatures also mean greedy.
    if !s.temperature.is_finite() || s.temperature <= 0.0 {
        chain.push(LlamaSampler::greedy());
        return LlamaSampler::chain_simple(chain);
    }
    let seed = s.seed.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
            .unwrap_or(0);
        nanos ^ std::process::id()
    });
    if s.repeat_last_n > 0 && s.repeat_penalty.is_finite() && s.repeat_penalty > 0.0 {
        chain.push(LlamaSampler::penalties(
            n_vocab,
            s.repeat_last_n,
            s.repeat_penalty,
            0.0,
            0.0,
        ));
    }
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

/// The grammar sampler for the tools of a request: exactly one tool call from the first token
/// (`required`), else lazy, active from the moment the output contains [`tools::OPEN`].
/// `None` (unconstrained decoding) when the grammar cannot be built.
fn tool_grammar(
    model: &LlamaModel,
    defs: &[ToolDefinition],
    required: bool,
) -> Option<LlamaSampler> {
    let grammar = tools::grammar(defs)
        .map_err(|e| tracing::warn!("{e}; tool calls are not constrained"))
        .ok()?;
    let sampler = if required {
        LlamaSampler::grammar(model, &grammar, tools::ROOT_ONE)
    } else {
        LlamaSampler::grammar_lazy(model, &grammar, tools::ROOT_MANY, [tools::OPEN], &[])
    };
    sampler
        .map_err(|e| tracing::warn!("tool-call grammar rejected by llama.cpp: {e}"))
        .ok()
}

/// Sample with a chain that holds a grammar. Unlike [`LlamaSampler::sample`], a grammar that
/// rejects every token or fails to accept one is reported as an error instead of aborting the
/// process inside llama.cpp.
fn sample_constrained(
    sampler: &mut LlamaSampler,
    ctx: &LlamaContext<'_>,
    index: i32,
) -> Result<LlamaToken, String> {
    let mut candidates = ctx.token_data_array_ith(index);
    candidates.apply_sampler(sampler);
    let chosen = candidates
        .selected
        .and_then(|i| candidates.data.get(i))
        .ok_or("the sampler selected no token")?;
    if chosen.logit() == f32::NEG_INFINITY {
        return Err("the tool-call grammar allows no token".into());
    }
    let token = chosen.id();
    sampler
        .try_accept(token)
        .map_err(|e| format!("the tool-call grammar rejected a token: {e}"))?;
    Ok(token)
}

/// Hand parsed output to the reply; tool calls get ids `call_local_<n>`, `n` counting on from
/// `last_id`. Returns `false` when the consumer is gone.
fn deliver(reply: &mut Reply, pieces: Vec<Piece>, last_id: &mut u64) -> bool {
    for piece in pieces {
        let alive = match piece {
            Piece::Text(text) => reply.text(&text),
            Piece::Start { name } => {
                *last_id += 1;
                reply.tool_call_start(format!("call_local_{last_id}"), &name)
            }
            Piece::Args(delta) => reply.tool_call_delta(&delta),
            Piece::End { name, arguments } => reply.tool_call_end(&name, arguments),
        };
        if !alive {
            return false;
        }
    }
    true
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
        prefix_cache,
        dump_prompt,
        tool_choice,
        mut reply,
    } = job;
    if reply.is_closed() {
        return;
    }
    if cancel.is_cancelled() {
        reply.aborted(None);
        return;
    }

    let prompt = render_prompt(loaded, &context, tool_choice);
    if let Some(file) = &dump_prompt {
        if let Err(e) = std::fs::write(file, &prompt) {
            tracing::warn!("could not write the prompt to {}: {e}", file.display());
        }
    }
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

    // Re-use the longest prefix already in the KV cache (unless `prefix_cache` is off); at
    // least one token is evaluated so that there are logits to sample from.
    let mut reuse = if prefix_cache {
        s.cached
            .iter()
            .zip(&tokens)
            .take_while(|(a, b)| a == b)
            .count()
            .min(tokens.len() - 1)
    } else {
        0
    };
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
    let use_tools = !context.tools.is_empty();
    let required = use_tools && tool_choice == ToolChoice::Required;
    let grammar = use_tools
        .then(|| tool_grammar(&loaded.model, &context.tools, required))
        .flatten();
    let mut constrained = grammar.is_some();
    let n_vocab = loaded.model.n_vocab();
    let mut sampler = build_sampler(&sampling, n_vocab, grammar);
    let mut parser = use_tools.then(CallParser::default);
    let mut last_id = tools::last_call_number(context.messages.iter().flat_map(|m| match m {
        Message::Assistant(a) => a.tool_calls().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        _ => Vec::new(),
    }));
    let mut utf8 = Utf8Stream::default();
    let mut logits_index = batch.n_tokens() - 1;
    let reason = loop {
        if cancel.is_cancelled() {
            let tail = utf8.finish();
            match parser.as_mut() {
                Some(p) => {
                    deliver(&mut reply, p.push(&tail), &mut last_id);
                    if let Some(held) = p.pending_text() {
                        reply.text(&held);
                    }
                }
                None => {
                    reply.text(&tail);
                }
            }
            reply.aborted(Some(counts));
            return;
        }
        if counts.generated >= max_new {
            break StopReason::Length;
        }
        let token = if constrained {
            match sample_constrained(&mut sampler, &s.ctx, logits_index) {
                Ok(token) => token,
                Err(e) => {
                    // Carry on unconstrained; the parser still turns what comes into calls.
                    tracing::warn!("{e}; decoding continues without the grammar");
                    constrained = false;
                    sampler = build_sampler(&sampling, n_vocab, None);
                    sampler.sample(&s.ctx, logits_index)
                }
            }
        } else {
            sampler.sample(&s.ctx, logits_index)
        };
        if vocab.is_eog(token) {
            break StopReason::Stop;
        }
        counts.generated += 1;
        let text = utf8.push(&vocab.token_to_piece(token, false, None));
        let alive = match parser.as_mut() {
            Some(p) => deliver(&mut reply, p.push(&text), &mut last_id),
            None => reply.text(&text),
        };
        if !alive {
            // The consumer dropped the stream: stop quietly.
            return;
        }
        if required && parser.as_ref().is_some_and(|p| p.calls() > 0) {
            // The one required call is complete (the grammar allows nothing but the end).
            break StopReason::Stop;
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
    match parser.as_mut() {
        Some(p) => {
            let mut pieces = p.push(&tail);
            pieces.extend(p.finish());
            deliver(&mut reply, pieces, &mut last_id);
        }
        None => {
            reply.text(&tail);
        }
    }
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

    use serde_json::json;

    /// The template stored in SmolLM2-135M-Instruct's GGUF (no tool section).
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    /// A Hermes/Qwen-style template: tools in the system turn, calls in `<tool_call>` blocks.
    const HERMES: &str = "{% if tools %}<|im_start|>system\n{{ messages[0].content }}\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>\nUse <tool_call></tool_call>.<|im_end|>\n{% endif %}{% for m in messages %}{% if not (tools and loop.first) %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}<|im_start|>assistant\n";

    /// A template that lists tools its own way (Llama-3 style), without `<tool_call>`.
    const OTHER: &str = "{% if tools %}[TOOLS]{% for t in tools %}{{ t.function.name }};{% endfor %}[/TOOLS]{% endif %}{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}<assistant>";

    fn tools_context() -> Context {
        Context {
            system_prompt: "You are a coding assistant.".into(),
            messages: vec![Message::user_text("list the files")],
            tools: vec![ToolDefinition {
                name: "ls".into(),
                description: "List a directory".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
        }
    }

    fn info(source: &str) -> TemplateInfo<'_> {
        TemplateInfo {
            source: Some(source),
            bos: "<s>",
            eos: "</s>",
        }
    }

    #[test]
    fn own_tool_section_when_the_template_has_none() {
        let prompt = template_prompt(&info(SMOLLM2), &tools_context(), ToolChoice::Auto).unwrap();
        assert!(
            prompt.starts_with("<|im_start|>system\nYou are a coding assistant.\n\n# Tools\n"),
            "{prompt}"
        );
        assert!(prompt.contains("<tools>\n{\"name\":\"ls\""), "{prompt}");
        assert!(
            prompt.contains("<tool_call>\n{\"name\": \"tool_name\""),
            "{prompt}"
        );
        assert!(prompt.ends_with(
            "<|im_end|>\n<|im_start|>user\nlist the files<|im_end|>\n<|im_start|>assistant\n"
        ));
        // No tools: the plain prompt.
        let mut plain = tools_context();
        plain.tools.clear();
        let prompt = template_prompt(&info(SMOLLM2), &plain, ToolChoice::Required).unwrap();
        assert!(!prompt.contains("# Tools"), "{prompt}");
    }

    #[test]
    fn template_tool_sections_are_used() {
        let prompt = template_prompt(&info(HERMES), &tools_context(), ToolChoice::Auto).unwrap();
        assert!(
            prompt.contains("<tools>{\"type\": \"function\""),
            "{prompt}"
        );
        assert!(!prompt.contains("# Tools"), "{prompt}");
        assert!(!prompt.contains("To call a tool"), "{prompt}");

        let prompt = template_prompt(&info(OTHER), &tools_context(), ToolChoice::Auto).unwrap();
        assert!(prompt.starts_with("[TOOLS]ls;[/TOOLS]"), "{prompt}");
        assert!(!prompt.contains("<tools>"), "{prompt}");
        assert!(
            prompt.contains("To call a tool, write a <tool_call> block"),
            "{prompt}"
        );
    }

    #[test]
    fn no_template_gives_messages_with_the_section() {
        let none = TemplateInfo {
            source: None,
            bos: "",
            eos: "",
        };
        let messages = template_prompt(&none, &tools_context(), ToolChoice::Auto).unwrap_err();
        let system = messages[0]["content"].as_str().unwrap();
        assert!(system.contains("# Tools"), "{system}");
    }

    #[test]
    fn threads() {
        assert_eq!(thread_count(Some(3)), 3);
        assert!(thread_count(None) >= 1);
        // One core is left free (unless the environment names a count).
        if std::env::var_os("PI_LOCAL_THREADS").is_none() {
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
            assert_eq!(
                crate::default_threads() as usize,
                cores.saturating_sub(1).max(1)
            );
        }
    }

    #[test]
    fn sampling_line() {
        assert_eq!(
            SamplingConfig::default().to_string(),
            "temperature 0.6, top-k 40, top-p 0.95, min-p 0.05, repeat penalty 1.1 over 64 tokens"
        );
        assert_eq!(SamplingConfig::greedy().to_string(), "greedy");
    }
}
