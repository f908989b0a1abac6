//! `pi mcp add|remove|list` (upstream 1.6 `docs/cli.md` "MCP commands", `docs/mcp.md`):
//! manage `mcp.json` and check servers without starting a session.
//!
//! * `pi mcp add [-l] <name> [--env K=V]… [--cwd DIR] [--exposure E] [--description T] -- <command> <args…>`
//!   and `pi mcp add [-l] <name> --url URL [--header K=V]… [--bearer-token-env-var NAME]`:
//!   add or replace the entry in `<agent>/mcp.json` (or `.pi/mcp.json` with `-l`), keeping the
//!   file's other content and indentation.
//! * `pi mcp remove [-l] <name>`.
//! * `pi mcp list`: connects to every enabled server and prints its state, tools and errors;
//!   exit 1 when an entry is invalid or an enabled server does not connect.
//! * `pi mcp login <server> [-l] [--timeout <seconds>]`: connects first (already signed in:
//!   done), else signs in through the browser (crate::mcp::oauth; the authorization URL is
//!   printed on stdout) and connects with the new tokens; `pi mcp logout <server> [-l]`
//!   deletes the stored credentials. Exit 1 on failure.

use super::config;
use super::log::McpLog;
use super::manager::{McpManager, ServerState};
use serde_json::{json, Map, Value};
use std::path::Path;

const HELP: &str = "Usage:
  pi mcp add <server> [options] -- <command> [args...]
  pi mcp add <server> [options] --url <url>
  pi mcp remove <server> [-l]
  pi mcp list
  pi mcp login <server> [-l] [--timeout <seconds>]
  pi mcp logout <server> [-l]

Configure and check MCP servers without starting a session.
Reads ~/.pi/agent/mcp.json and, in trusted projects, .pi/mcp.json.

Options for add and remove:
  -l, --local             Use .pi/mcp.json in the current project instead of the global file

Options for add:
  --url <url>             Streamable HTTP server URL (instead of a command)
  --env <KEY=VALUE>       Environment variable for a stdio server (repeatable)
  --cwd <dir>             Working directory for a stdio server
  --header <KEY=VALUE>    HTTP header (repeatable)
  --bearer-token-env-var <NAME>
                          Send \"Authorization: Bearer ${NAME}\"
  --exposure <mode>       codemode (default), deferred, direct, or hidden
  --description <text>    What the server offers

Options for login:
  --timeout <seconds>     Time limit for the whole sign-in (default: 300)
";

fn open_browser(url: &str) {
    // Only where a desktop session can show it; the URL is printed either way.
    if std::env::var_os("DISPLAY").is_none() && std::env::var_os("WAYLAND_DISPLAY").is_none() {
        return;
    }
    let _ = std::process::Command::new("xdg-open")
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// `pi mcp login|logout <server> [-l] [--timeout <seconds>]`.
fn auth(command: &str, rest: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    let mut local = false;
    let mut timeout = super::oauth::SIGN_IN_WAIT;
    let mut positional = Vec::new();
    let mut it = rest.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-l" | "--local" => local = true,
            "--timeout" if command == "login" => {
                match it.next().and_then(|v| v.parse::<f64>().ok()) {
                    Some(t) if t > 0.0 && t.is_finite() => {
                        timeout = std::time::Duration::from_secs_f64(t)
                    }
                    _ => {
                        eprintln!("--timeout must be a positive number of seconds.");
                        return 1;
                    }
                }
            }
            other if other.starts_with('-') => {
                eprintln!("Unknown option {other}.\nUse \"pi mcp --help\" for usage.");
                return 1;
            }
            other => positional.push(other.to_string()),
        }
    }
    let [name] = positional.as_slice() else {
        eprintln!("Usage: pi mcp {command} <server> [-l]\nUse \"pi mcp --help\" for usage.");
        return 1;
    };
    let trusted = project_trusted(cwd, agent_dir);
    let cfg = config::load(agent_dir, cwd, trusted);
    let Some(entry) = cfg.servers.iter().find(|s| &s.name == name).cloned() else {
        let names: Vec<&str> = cfg.servers.iter().map(|s| s.name.as_str()).collect();
        eprintln!(
            "No MCP server named \"{name}\". Configured: {}.",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
        return 1;
    };
    if local && entry.scope != "project" {
        eprintln!(
            "MCP server \"{name}\" is defined in {}, not in the project; omit --local.",
            entry.source.display()
        );
        return 1;
    }
    let Some(url) = super::oauth::oauth_url(&entry).map(str::to_string) else {
        eprintln!("MCP server \"{name}\" does not use OAuth. Only HTTP servers without an Authorization header do.");
        return 1;
    };
    let store = super::oauth::AuthStore::new(agent_dir);
    if command == "logout" {
        return match store.remove(name, &url) {
            Ok(true) => {
                println!("Signed out of MCP server \"{name}\".");
                0
            }
            Ok(false) => {
                println!("No stored credentials for MCP server \"{name}\".");
                0
            }
            Err(e) => {
                eprintln!("{e}");
                1
            }
        };
    }
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
    let mut one = cfg;
    one.servers = vec![entry.clone()];
    one.errors.clear();
    let manager = McpManager::new(one, cwd, agent_dir, McpLog::none(), false);
    let Some(slot) = manager.servers().first().cloned() else {
        return 1;
    };
    let code = runtime.block_on(async {
        // Connecting first tells whether a sign-in is needed and records the challenge.
        if slot.ensure_connected().await.is_ok() {
            println!(
                "Already signed in to MCP server \"{name}\" ({} tools).",
                slot.tools().len()
            );
            return 0;
        }
        if slot.state() != ServerState::NeedsAuth {
            eprintln!(
                "MCP server \"{name}\" failed to connect: {}",
                slot.error().unwrap_or_else(|| "unknown error".into())
            );
            return 1;
        }
        let shown = name.clone();
        let result = super::oauth::sign_in(
            &store,
            super::oauth::SignIn {
                name,
                url: &url,
                settings: super::oauth::OAuthSettings::from_config(&entry),
                challenge: slot.challenge(),
                show_url: Box::new(move |u| {
                    use std::io::Write;
                    println!("Sign in to MCP server \"{shown}\" in your browser:\n{u}");
                    let _ = std::io::stdout().flush();
                    open_browser(u);
                }),
                wait: timeout,
            },
        )
        .await;
        if let Err(e) = result {
            eprintln!("Sign-in to MCP server \"{name}\" failed: {e}");
            return 1;
        }
        if let Err(e) = slot.reconnect().await {
            eprintln!("Signed in, but {e}");
            return 1;
        }
        println!(
            "Signed in to MCP server \"{name}\" ({} tools).",
            slot.tools().len()
        );
        0
    });
    runtime.block_on(manager.shutdown());
    code
}

/// Runs `pi mcp <args…>` (`args` after `mcp`); returns the exit code.
pub fn run(args: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    let Some(command) = args.first() else {
        print!("{HELP}");
        return 0;
    };
    let rest = &args[1..];
    let mut before_dashes = rest.iter().take_while(|a| *a != "--");
    if command == "--help" || command == "-h" || before_dashes.any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return 0;
    }
    match command.as_str() {
        "add" => add(rest, cwd, agent_dir),
        "remove" => remove(rest, cwd, agent_dir),
        "list" => list(rest, cwd, agent_dir),
        "login" | "logout" => auth(command, rest, cwd, agent_dir),
        other => {
            eprintln!("Unknown mcp command \"{other}\".\nUse \"pi mcp --help\" for usage.");
            1
        }
    }
}

fn project_trusted(cwd: &Path, agent_dir: &Path) -> bool {
    let settings = crate::config::Settings::load_with_trust(agent_dir, cwd, false);
    crate::trust::TrustPolicy {
        cli_override: None,
        default_trust: settings.default_project_trust().to_string(),
        store: crate::trust::TrustStore::new(agent_dir),
        home: crate::config::home_dir(),
    }
    .decide(cwd)
    .trusted
}

fn list(rest: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    if let Some(a) = rest.first() {
        eprintln!("Unexpected argument {a}.\nUsage: pi mcp list");
        return 1;
    }
    let trusted = project_trusted(cwd, agent_dir);
    let cfg = config::load(agent_dir, cwd, trusted);
    let errors = cfg.errors.clone();
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
    let manager = McpManager::new(cfg, cwd, agent_dir, McpLog::none(), false);
    runtime.block_on(async {
        futures::future::join_all(manager.servers().iter().filter(|s| s.cfg.enabled).map(
            |s| async move {
                let _ = s.ensure_connected().await;
            },
        ))
        .await;
    });
    let mut failed = !errors.is_empty();
    if manager.servers().is_empty() && errors.is_empty() {
        println!(
            "No MCP servers configured. Add them to {} or .pi/mcp.json.",
            agent_dir.join("mcp.json").display()
        );
    }
    for s in manager.servers() {
        let state = s.state();
        let tools: Vec<String> = s
            .tools()
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_string))
            .collect();
        let word = match &state {
            ServerState::Connected => format!(
                "connected, {} tool{}",
                tools.len(),
                if tools.len() == 1 { "" } else { "s" }
            ),
            ServerState::NeedsAuth => "needs sign-in".to_string(),
            other => other.word().to_string(),
        };
        if s.cfg.enabled && state != ServerState::Connected {
            failed = true;
        }
        println!(
            "{}: {word} ({}, {})",
            s.cfg.name,
            s.cfg.exposure.as_str(),
            s.cfg.scope
        );
        println!("  {}", s.cfg.describe_transport());
        if let Some(o) = &s.cfg.override_source {
            println!("  project override: {}", o.display());
        }
        if !tools.is_empty() {
            let shown: Vec<String> = tools
                .iter()
                .map(|t| {
                    let e = s.cfg.tool_exposure(t);
                    if e == s.cfg.exposure {
                        t.clone()
                    } else {
                        format!("{t} [{}]", e.as_str())
                    }
                })
                .collect();
            println!("  tools: {}", shown.join(", "));
        }
        if s.has_resources() {
            println!("  offers resources");
        }
        if let ServerState::Failed(e) = &state {
            println!("  {}", e.replace('\n', "\n  "));
        }
        if state == ServerState::NeedsAuth {
            println!("  sign in with: pi mcp login {}", s.cfg.name);
        }
    }
    for e in &errors {
        println!("config error: {e}");
    }
    let project = config::project_path(cwd);
    if !trusted && project.exists() {
        println!(
            "{} is ignored because the project is not trusted. Start pi in the project to trust it.",
            project.display()
        );
    }
    runtime.block_on(manager.shutdown());
    i32::from(failed)
}

/// Options of `add`: name → takes a value.
const ADD_OPTIONS: [(&str, bool); 9] = [
    ("local", false),
    ("url", true),
    ("env", true),
    ("cwd", true),
    ("header", true),
    ("bearer-token-env-var", true),
    ("exposure", true),
    ("description", true),
    ("approve", false),
];

fn add(rest: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    let usage =
        "Usage: pi mcp add <server> [options] (--url <url> | -- <command> [args...])\nUse \"pi mcp --help\" for usage.";
    let mut positional: Vec<String> = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut values: Vec<(String, String)> = Vec::new();
    let mut local = false;
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        if a == "--" {
            command = rest[i + 1..].to_vec();
            break;
        }
        if a == "-l" || a == "--local" {
            local = true;
        } else if let Some(opt) = a.strip_prefix("--") {
            let (key, inline) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (opt, None),
            };
            match ADD_OPTIONS.iter().find(|(k, _)| *k == key) {
                Some((_, true)) => {
                    let v = match inline {
                        Some(v) => v,
                        None => {
                            i += 1;
                            match rest.get(i) {
                                Some(v) => v.clone(),
                                None => {
                                    eprintln!("--{key} needs a value.");
                                    return 1;
                                }
                            }
                        }
                    };
                    values.push((key.to_string(), v));
                }
                Some((_, false)) => {}
                None => {
                    eprintln!("Unknown option --{key}.\nUse \"pi mcp --help\" for usage.");
                    return 1;
                }
            }
        } else {
            positional.push(a.clone());
        }
        i += 1;
    }
    let get = |k: &str| {
        values
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let all = |k: &str| -> Vec<String> {
        values
            .iter()
            .filter(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .collect()
    };
    let url = get("url");
    let Some(name) = positional.first().cloned() else {
        eprintln!("{usage}");
        return 1;
    };
    if positional.len() > 1 || url.is_some() != command.is_empty() {
        eprintln!("{usage}");
        return 1;
    }
    let http_only = ["header", "bearer-token-env-var"];
    let stdio_only = ["env", "cwd"];
    let misplaced = if url.is_some() {
        stdio_only.iter().find(|k| get(k).is_some())
    } else {
        http_only.iter().find(|k| get(k).is_some())
    };
    if let Some(m) = misplaced {
        let applies = if url.is_some() {
            "stdio servers"
        } else {
            "HTTP servers (--url)"
        };
        eprintln!("--{m} only applies to {applies}.");
        return 1;
    }
    let pairs = |opt: &str| -> Result<Map<String, Value>, String> {
        let mut m = Map::new();
        for p in all(opt) {
            match p.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    m.insert(k.to_string(), json!(v));
                }
                _ => return Err(format!("--{opt} expects KEY=VALUE, got \"{p}\".")),
            }
        }
        Ok(m)
    };
    let mut entry = Map::new();
    if let Some(url) = &url {
        entry.insert("url".into(), json!(url));
        let mut headers = match pairs("header") {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{e}");
                return 1;
            }
        };
        if let Some(b) = get("bearer-token-env-var") {
            headers.insert("Authorization".into(), json!(format!("Bearer ${{{b}}}")));
        }
        if !headers.is_empty() {
            entry.insert("headers".into(), Value::Object(headers));
        }
    } else {
        entry.insert("command".into(), json!(command[0]));
        if command.len() > 1 {
            entry.insert("args".into(), json!(command[1..]));
        }
        let env = match pairs("env") {
            Ok(h) => h,
            Err(e) => {
                eprintln!("{e}");
                return 1;
            }
        };
        if !env.is_empty() {
            entry.insert("env".into(), Value::Object(env));
        }
        if let Some(c) = get("cwd") {
            entry.insert("cwd".into(), json!(c));
        }
    }
    if let Some(e) = get("exposure") {
        entry.insert("exposure".into(), json!(e));
    }
    if let Some(d) = get("description") {
        entry.insert("description".into(), json!(d));
    }
    let entry = Value::Object(entry);
    let path = if local {
        config::project_path(cwd)
    } else {
        agent_dir.join("mcp.json")
    };
    let scope = if local { "project" } else { "global" };
    if let Err(e) = config::validate(&name, &entry, &path, scope) {
        eprintln!("{e}");
        return 1;
    }
    let mut replaced = false;
    let edited = edit_servers(&path, |servers| {
        replaced = servers.insert(name.clone(), entry.clone()).is_some();
        true
    });
    if let Err(e) = edited {
        eprintln!("Could not update {}: {e}", path.display());
        return 1;
    }
    println!(
        "{} {scope} MCP server \"{name}\" in {}.",
        if replaced { "Replaced" } else { "Added" },
        path.display()
    );
    if local && !project_trusted(cwd, agent_dir) {
        println!(
            "The project is not trusted, so {} is ignored until you start pi in the project and trust it.",
            path.display()
        );
    }
    println!("Check it with: pi mcp list");
    0
}

fn remove(rest: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    let mut local = false;
    let mut names = Vec::new();
    for a in rest {
        match a.as_str() {
            "-l" | "--local" => local = true,
            s if s.starts_with('-') => {
                eprintln!("Unknown option {s}.\nUse \"pi mcp --help\" for usage.");
                return 1;
            }
            _ => names.push(a.clone()),
        }
    }
    if names.len() != 1 {
        eprintln!("Usage: pi mcp remove <server> [-l]\nUse \"pi mcp --help\" for usage.");
        return 1;
    }
    let name = &names[0];
    let path = if local {
        config::project_path(cwd)
    } else {
        agent_dir.join("mcp.json")
    };
    let scope = if local { "project" } else { "global" };
    let mut removed = false;
    if path.exists() {
        if let Err(e) = edit_servers(&path, |servers| {
            removed = servers.remove(name).is_some();
            removed
        }) {
            eprintln!("Could not update {}: {e}", path.display());
            return 1;
        }
    }
    if removed {
        println!(
            "Removed {scope} MCP server \"{name}\" from {}.",
            path.display()
        );
        return 0;
    }
    let other = config::load(agent_dir, cwd, true)
        .servers
        .into_iter()
        .find(|s| &s.name == name && s.scope != scope);
    let hint = match other {
        Some(o) => format!(
            " It is defined in {}{}.",
            o.source.display(),
            if o.scope == "project" {
                "; use --local"
            } else {
                "; omit --local"
            }
        ),
        None => String::new(),
    };
    eprintln!(
        "No {scope} MCP server named \"{name}\" in {}.{hint}",
        path.display()
    );
    1
}

/// Reads `path` (an empty object when missing), lets `edit` change its `mcpServers`, and writes
/// it back (whole file, via a temp file and rename) with the file's indentation when `edit`
/// returns true. Other content is kept.
fn edit_servers(
    path: &Path,
    edit: impl FnOnce(&mut Map<String, Value>) -> bool,
) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.to_string()),
    };
    let text = text.map(|t| t.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(t));
    let mut parsed: Value = match &text {
        Some(t) => serde_json::from_str(t).map_err(|e| e.to_string())?,
        None => json!({}),
    };
    let bad = || {
        format!(
            "{}: expected an object with an \"mcpServers\" object",
            path.display()
        )
    };
    let obj = parsed.as_object_mut().ok_or_else(bad)?;
    let servers = obj
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let servers = servers.as_object_mut().ok_or_else(bad)?;
    if !edit(servers) {
        return Ok(());
    }
    let indent: String = text
        .as_deref()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with([' ', '\t']) && !l.trim().is_empty())
                .map(|l| l.chars().take_while(|c| *c == ' ' || *c == '\t').collect())
        })
        .unwrap_or_else(|| "  ".into());
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    serde::Serialize::serialize(&parsed, &mut ser).map_err(|e| e.to_string())?;
    buf.push(b'\n');
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| e.to_string())?;
    std::fs::write(tmp.path(), &buf).map_err(|e| e.to_string())?;
    tmp.persist(path).map_err(|e| e.to_string())?;
    Ok(())
}
