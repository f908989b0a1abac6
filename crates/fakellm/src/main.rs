//! `fakellm`: serves a JSON script file (fakellm.py's format, or a conformance scenario file
//! with an `llm` key) on 127.0.0.1 and prints `LISTENING <port>` once bound.
//!
//! Usage: `fakellm [--script FILE] [--log FILE.jsonl] [--port N]`

use pi_fakellm::{FakeLlm, Options, Script};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: fakellm [--script FILE] [--log FILE.jsonl] [--port N]";

fn main() -> ExitCode {
    let mut script_path: Option<PathBuf> = None;
    let mut options = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        let r = match arg.as_str() {
            "--script" => value("--script").map(|v| script_path = Some(v.into())),
            "--log" => value("--log").map(|v| options.log_path = Some(v.into())),
            "--port" => value("--port")
                .and_then(|v| v.parse().map_err(|e| format!("bad --port: {e}")))
                .map(|p| options.port = p),
            "--host" => value("--host").and_then(|h| match h.as_str() {
                "127.0.0.1" | "localhost" => Ok(()),
                _ => Err("fakellm only binds to 127.0.0.1".to_string()),
            }),
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => Err(format!("unknown argument {other}")),
        };
        if let Err(e) = r {
            eprintln!("fakellm: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    }
    let script = match &script_path {
        None => Script::default(),
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| Script::from_json_str(&t).map_err(|e| e.to_string()))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("fakellm: cannot load {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
        },
    };
    let fake = match FakeLlm::spawn_with(script, options) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fakellm: cannot bind: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("LISTENING {}", fake.port());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
