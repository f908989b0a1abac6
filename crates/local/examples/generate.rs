//! Streams one answer from a local GGUF model and prints rough timings.
//!
//! `cargo run --example generate -- <file.gguf> "prompt" [max_tokens]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use futures::StreamExt;
use pi_ai::{AssistantMessageEvent, Context, Message, Provider, StreamOptions};
use pi_local::{discover_models, LocalConfig, LocalProvider, SamplingConfig};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(prompt)) = (args.next().map(PathBuf::from), args.next()) else {
        eprintln!("usage: generate <file.gguf> <prompt> [max_tokens]");
        std::process::exit(2);
    };
    let max_tokens = args.next().and_then(|n| n.parse().ok()).unwrap_or(128);
    let dir = path.parent().map(PathBuf::from).unwrap_or_default();
    let Some(model) = discover_models(&dir)
        .into_iter()
        .find(|m| std::path::Path::new(&m.base_url) == path)
    else {
        eprintln!("not a readable GGUF file: {}", path.display());
        std::process::exit(1);
    };
    let provider = LocalProvider::with_config(LocalConfig {
        sampling: SamplingConfig::greedy(),
        ..LocalConfig::default()
    });
    let context = Context {
        system_prompt: "You are a helpful assistant.".into(),
        messages: vec![Message::user_text(prompt)],
        tools: vec![],
    };
    let options = StreamOptions {
        max_tokens: Some(max_tokens),
        ..StreamOptions::default()
    };
    let started = Instant::now();
    let mut first = None;
    let mut stream = provider.stream(&model, &context, options);
    while let Some(event) = stream.next().await {
        match event {
            AssistantMessageEvent::TextDelta { delta, .. } => {
                first.get_or_insert_with(|| started.elapsed());
                print!("{delta}");
                let _ = std::io::stdout().flush();
            }
            AssistantMessageEvent::Done { message, .. }
            | AssistantMessageEvent::Error { message, .. } => {
                let total = started.elapsed();
                let ttft = first.unwrap_or(total);
                let gen_secs = (total - ttft).as_secs_f64().max(1e-9);
                println!();
                eprintln!(
                    "stop={:?} error={:?} usage={:?}",
                    message.stop_reason, message.error_message, message.usage
                );
                eprintln!(
                    "first token (incl. load) {ttft:?}, total {total:?}, generation {:.1} tok/s",
                    message.usage.output.saturating_sub(1) as f64 / gen_secs
                );
            }
            _ => {}
        }
    }
}
