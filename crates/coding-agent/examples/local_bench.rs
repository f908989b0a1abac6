//! Benchmark of the in-process GGUF provider (`pi-local`, issue 3) with the agent's real
//! system prompt and tool definitions.
//!
//! ```text
//! cargo run --release -p pi-coding-agent --example local_bench -- \
//!     --model ~/.pi/agent/models/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 --runs 3 \
//!     --dump-prompt /tmp/turn1.txt
//! ```
//!
//! Drives [`pi_local::LocalProvider`] through the [`pi_ai::Provider`] stream, as the agent
//! does. The system prompt and tools are built as `pi` builds them for the default tools
//! (`read`, `bash`, `edit`, `write`) in the current directory, without context files or skills
//! (like `pi --no-context-files`). Sampling is greedy, output is capped at `--max-tokens`.
//!
//! Measured, medians over `--runs`:
//!
//! * load: time from the first request to its `Start` event (model file loaded, llama.cpp
//!   context of `contextWindow` tokens created, prompt rendered), on a short warm-up request;
//! * turn 1 (full prompt evaluated, `prefix_cache: false`): time to first token (TTFT), prefill
//!   tokens/s = prompt tokens / TTFT, generation tokens/s = (output tokens − 1) / (last delta −
//!   first delta);
//! * turn 2 (turn 1 + its answer + a short user message): TTFT with the KV cache kept from
//!   turn 1, and without it (`prefix_cache: false`, whole prompt evaluated again);
//! * peak RSS: `VmHWM` of this process at the end.
//!
//! `--dump-prompt FILE` writes the exact rendered text of turn 1 to `FILE` (and of turn 2 to
//! `FILE.turn2`), for `bench/local_model_reference.py`, which measures the same through
//! llama-cpp-python. `--json FILE` writes every sample and the medians.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "local")]
fn main() {
    bench::main();
}

/// Without the `local` feature there is no in-process provider to measure.
#[cfg(not(feature = "local"))]
fn main() {
    eprintln!("local_bench needs the `local` feature of pi-coding-agent (on by default)");
    std::process::exit(2);
}

#[cfg(feature = "local")]
mod bench {
    use futures::StreamExt;
    use pi_ai::{
        AssistantMessage, AssistantMessageEvent, Content, Context, Message, Model, Provider,
        StreamOptions, ToolResultMessage,
    };
    use pi_coding_agent::system_prompt::{build_system_message, PromptTool, SystemPromptInput};
    use pi_coding_agent::tools;
    use pi_local::{discover_models, LocalConfig, LocalProvider, SamplingConfig};
    use serde_json::json;
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    /// First user message.
    const TURN1: &str =
        "Explain in three sentences what a closure is in Rust, with a one-line example.";
    /// Follow-up user message of turn 2.
    const TURN2: &str = "Thanks. Now say the same in one sentence.";

    /// Command-line options.
    struct Args {
        model: PathBuf,
        threads: u32,
        runs: usize,
        max_tokens: u64,
        dump_prompt: Option<PathBuf>,
        json: Option<PathBuf>,
    }

    const USAGE: &str = "usage: local_bench [--model FILE.gguf] [--threads N (2)] [--runs N (3)] \
                         [--max-tokens N (128)] [--dump-prompt FILE] [--json FILE]";

    fn parse_args() -> Args {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default();
        let mut args = Args {
            model: home.join(".pi/agent/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
            threads: 2,
            runs: 3,
            max_tokens: 128,
            dump_prompt: None,
            json: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next().unwrap_or_else(|| {
                    eprintln!("{flag} needs a value\n{USAGE}");
                    std::process::exit(2)
                })
            };
            let number = |v: String| -> u64 {
                v.parse().unwrap_or_else(|_| {
                    eprintln!("not a number: {v}\n{USAGE}");
                    std::process::exit(2)
                })
            };
            match flag.as_str() {
                "--model" => args.model = PathBuf::from(value()),
                "--threads" => args.threads = number(value()).max(1) as u32,
                "--runs" => args.runs = number(value()).max(1) as usize,
                "--max-tokens" => args.max_tokens = number(value()).max(2),
                "--dump-prompt" => args.dump_prompt = Some(PathBuf::from(value())),
                "--json" => args.json = Some(PathBuf::from(value())),
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0)
                }
                other => {
                    eprintln!("unknown option {other}\n{USAGE}");
                    std::process::exit(2)
                }
            }
        }
        args
    }

    /// Timings and token counts of one streamed response.
    #[derive(Debug, Clone)]
    struct Turn {
        /// Request sent → `Start` event, ms.
        start_ms: f64,
        /// Request sent → first delta, ms.
        ttft_ms: f64,
        /// First delta → last delta, ms.
        stream_ms: f64,
        /// Request sent → `Done`, ms.
        total_ms: f64,
        /// Prompt tokens evaluated (`usage.input`).
        evaluated: u64,
        /// Prompt tokens re-used from the KV cache (`usage.cacheRead`).
        reused: u64,
        /// Output tokens (`usage.output`).
        output: u64,
        /// The final message.
        message: AssistantMessage,
    }

    impl Turn {
        fn prompt_tokens(&self) -> u64 {
            self.evaluated + self.reused
        }
        fn prefill_tps(&self) -> f64 {
            self.evaluated as f64 / (self.ttft_ms / 1000.0)
        }
        fn gen_tps(&self) -> f64 {
            if self.output < 2 || self.stream_ms <= 0.0 {
                return f64::NAN;
            }
            (self.output - 1) as f64 / (self.stream_ms / 1000.0)
        }
        fn json(&self) -> serde_json::Value {
            json!({
                "startMs": self.start_ms, "ttftMs": self.ttft_ms, "streamMs": self.stream_ms,
                "totalMs": self.total_ms, "evaluated": self.evaluated, "reused": self.reused,
                "output": self.output, "prefillTps": self.prefill_tps(),
                "genTps": self.gen_tps(), "stopReason": self.message.stop_reason,
            })
        }
    }

    /// Streams one response and times it.
    async fn turn(
        provider: &LocalProvider,
        model: &Model,
        context: &Context,
        max_tokens: u64,
    ) -> Turn {
        let options = StreamOptions {
            max_tokens: Some(max_tokens),
            ..StreamOptions::default()
        };
        let sent = Instant::now();
        let ms = |t: Instant| t.duration_since(sent).as_secs_f64() * 1000.0;
        let (mut started, mut first, mut last) = (None, None, None);
        let mut stream = provider.stream(model, context, options);
        while let Some(event) = stream.next().await {
            let now = Instant::now();
            match event {
                AssistantMessageEvent::Start { .. } => started = Some(now),
                AssistantMessageEvent::TextDelta { .. }
                | AssistantMessageEvent::ThinkingDelta { .. }
                | AssistantMessageEvent::ToolCallStart { .. }
                | AssistantMessageEvent::ToolCallDelta { .. } => {
                    first.get_or_insert(now);
                    last = Some(now);
                }
                AssistantMessageEvent::Done { message, .. } => {
                    let first = first.unwrap_or(now);
                    return Turn {
                        start_ms: ms(started.unwrap_or(now)),
                        ttft_ms: ms(first),
                        stream_ms: last.unwrap_or(now).duration_since(first).as_secs_f64() * 1000.0,
                        total_ms: ms(now),
                        evaluated: message.usage.input,
                        reused: message.usage.cache_read,
                        output: message.usage.output,
                        message: *message,
                    };
                }
                AssistantMessageEvent::Error { message, .. } => {
                    eprintln!(
                        "local model failed: {}",
                        message.error_message.as_deref().unwrap_or("(no message)")
                    );
                    std::process::exit(1);
                }
                _ => {}
            }
        }
        eprintln!("the stream ended without a final message");
        std::process::exit(1);
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// A `/proc/self/status` field in MB (`VmHWM`, `VmRSS`).
    fn status_mb(field: &str) -> f64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }

    fn loadavg() -> String {
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "?".into())
    }

    /// The agent's system prompt and tool definitions for the default tools in `cwd`.
    fn agent_context(cwd: &Path) -> Context {
        let names: Vec<&str> = tools::DEFAULT_TOOLS.to_vec();
        let active = tools::create_tools(cwd, &names);
        let input = SystemPromptInput::new(
            cwd,
            active
                .iter()
                .map(|t| PromptTool::new(t.definition()))
                .collect(),
        );
        let (_, system_prompt) = build_system_message(&input);
        Context {
            system_prompt,
            messages: vec![Message::user_text(TURN1)],
            tools: active.iter().map(|t| t.definition()).collect(),
        }
    }

    /// Turn 1's conversation plus its answer (tool calls, if any, get a stub result) and
    /// [`TURN2`].
    fn second_turn(first: &Context, answer: &AssistantMessage) -> Context {
        let mut context = first.clone();
        context.messages.push(Message::Assistant(answer.clone()));
        for call in answer.tool_calls() {
            context
                .messages
                .push(Message::ToolResult(ToolResultMessage {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    content: vec![Content::text("(not run by the benchmark)")],
                    details: None,
                    is_error: false,
                    duration_ms: None,
                    nested_calls: None,
                    timestamp: answer.timestamp,
                    extra: Default::default(),
                }));
        }
        context.messages.push(Message::user_text(TURN2));
        context
    }

    /// Runs the benchmark (see the file's doc comment).
    pub fn main() {
        let args = parse_args();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        runtime.block_on(run(args));
    }

    async fn run(args: Args) {
        let load_before = loadavg();
        let path = std::fs::canonicalize(&args.model).unwrap_or_else(|e| {
            eprintln!("{}: {e}", args.model.display());
            std::process::exit(1)
        });
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        let Some(model) = discover_models(&dir)
            .into_iter()
            .find(|m| Path::new(&m.base_url) == path)
        else {
            eprintln!("not a readable GGUF file: {}", path.display());
            std::process::exit(1)
        };
        let config = |prefix_cache: bool, dump: Option<PathBuf>| {
            LocalProvider::with_config(LocalConfig {
                threads: Some(args.threads),
                sampling: SamplingConfig::greedy(),
                prefix_cache,
                dump_prompt: dump,
                ..LocalConfig::default()
            })
        };
        let cached = config(true, None);
        let uncached = config(false, None);
        let dump1 = config(false, args.dump_prompt.clone());
        let dump2 = config(
            true,
            args.dump_prompt.as_ref().map(|p| {
                let mut s = p.clone().into_os_string();
                s.push(".turn2");
                PathBuf::from(s)
            }),
        );

        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let first = agent_context(&cwd);

        // Load: model file + context, measured on a short warm-up request (not counted).
        let warmup = Context {
            system_prompt: "You are a helpful assistant.".into(),
            messages: vec![Message::user_text("Hi")],
            tools: vec![],
        };
        let load = turn(&uncached, &model, &warmup, 1).await;
        let load_ms = load.start_ms;

        let mut t1s = Vec::new();
        let mut t2c = Vec::new();
        let mut t2n = Vec::new();
        for run in 0..args.runs {
            let p1 = if run == 0 { &dump1 } else { &uncached };
            let t1 = turn(p1, &model, &first, args.max_tokens).await;
            let second = second_turn(&first, &t1.message);
            let p2 = if run == 0 { &dump2 } else { &cached };
            let c = turn(p2, &model, &second, args.max_tokens).await;
            let n = turn(&uncached, &model, &second, args.max_tokens).await;
            eprintln!(
                "run {}: turn 1 ttft {:.0} ms ({} tok, prefill {:.0} tok/s), gen {:.1} tok/s \
                 ({} tok, {:?}); turn 2 ttft cached {:.1} ms (reused {}, evaluated {}) vs \
                 uncached {:.0} ms ({} tok)",
                run + 1,
                t1.ttft_ms,
                t1.prompt_tokens(),
                t1.prefill_tps(),
                t1.gen_tps(),
                t1.output,
                t1.message.stop_reason,
                c.ttft_ms,
                c.reused,
                c.evaluated,
                n.ttft_ms,
                n.prompt_tokens()
            );
            t1s.push(t1);
            t2c.push(c);
            t2n.push(n);
        }
        let peak_mb = status_mb("VmHWM:");
        let rss_mb = status_mb("VmRSS:");
        let load_after = loadavg();

        let med = |v: &[Turn], f: fn(&Turn) -> f64| median(v.iter().map(f).collect());
        let ttft1 = med(&t1s, |t| t.ttft_ms);
        let prefill = med(&t1s, Turn::prefill_tps);
        let gen = med(&t1s, Turn::gen_tps);
        let ttft2c = med(&t2c, |t| t.ttft_ms);
        let ttft2n = med(&t2n, |t| t.ttft_ms);
        let first_t1 = &t1s[0];
        let first_c = &t2c[0];

        let profile = if cfg!(debug_assertions) {
            "DEBUG build: figures are not representative"
        } else {
            "release build"
        };
        println!("pi-local benchmark ({profile}, provider \"local-gguf\")");
        println!("model          {}", path.display());
        println!(
            "threads        {}   n_ctx {}   max tokens {}   greedy   runs {} (medians)",
            args.threads, model.context_window, args.max_tokens, args.runs
        );
        println!(
            "prompt         agent system prompt ({} chars) + {} tool definitions; turn 1 = {} \
             tokens, turn 2 = {} tokens",
            first.system_prompt.chars().count(),
            first.tools.len(),
            first_t1.prompt_tokens(),
            first_c.prompt_tokens()
        );
        println!("load average   {load_before} (start), {load_after} (end)");
        println!();
        let rows = [
            ("load (model file + context), ms", load_ms),
            ("turn 1 time to first token, ms", ttft1),
            ("prefill, tokens/s", prefill),
            ("generation, tokens/s", gen),
            ("turn 2 TTFT with kept KV cache, ms", ttft2c),
            ("turn 2 TTFT without (full prompt), ms", ttft2n),
            ("turn 2 TTFT ratio with / without", ttft2c / ttft2n),
            ("peak RSS (VmHWM), MB", peak_mb),
            ("RSS at end (VmRSS), MB", rss_mb),
        ];
        println!("| {:<43} | {:>10} |", "metric", "value");
        println!("|{}|{}|", "-".repeat(45), "-".repeat(12));
        for (name, value) in rows {
            let digits = if value.abs() < 10.0 { 3 } else { 1 };
            println!("| {name:<43} | {value:>10.digits$} |");
        }
        println!();
        println!(
            "turn 2 with cache: {} tokens re-used, {} evaluated; turn 1 answer: {} tokens, \
             stop {:?}",
            first_c.reused, first_c.evaluated, first_t1.output, first_t1.message.stop_reason
        );
        if let Some(p) = &args.dump_prompt {
            println!("turn 1 prompt text written to {} (+ .turn2)", p.display());
        }

        if let Some(file) = &args.json {
            let all = |v: &[Turn]| v.iter().map(Turn::json).collect::<Vec<_>>();
            let report = json!({
                "model": path, "threads": args.threads, "nCtx": model.context_window,
                "maxTokens": args.max_tokens, "runs": args.runs,
                "loadavgStart": load_before, "loadavgEnd": load_after,
                "loadMs": load_ms, "peakRssMb": peak_mb, "rssMb": rss_mb,
                "median": {
                    "turn1TtftMs": ttft1, "prefillTps": prefill, "genTps": gen,
                    "turn2TtftCachedMs": ttft2c, "turn2TtftUncachedMs": ttft2n,
                },
                "turn1": all(&t1s), "turn2Cached": all(&t2c), "turn2Uncached": all(&t2n),
                "answer1": first_t1.message.text(),
            });
            let text = serde_json::to_string_pretty(&report).unwrap_or_default();
            if let Err(e) = std::fs::write(file, text) {
                eprintln!("{}: {e}", file.display());
            }
        }
    }
}
