//! Subcommands other than `models`: `pi install|remove|uninstall|update|list|config`,
//! `pi auth …`, `pi mcp …` (upstream-1.6-notes.md item 25; upstream 1.6 `docs/packages.md`).
//! They are commands, never prompts to the model.
//!
//! What works here: `pi list` (the `packages` of the agent-dir and project settings, printed as
//! upstream does), and `pi install|remove <local path> [-l]` (adds the path to / removes it from
//! `packages` in `<agent>/settings.json`, or `.pi/settings.json` with `-l`). What cannot work in
//! this build yet — npm and git sources, `update`, `config` (a TUI), `auth`, `mcp` — fails with a
//! clear message on stderr and exit 2.

use crate::cli::Subcommand;
use crate::config::{read_json_file, JsonFile};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Exit code of a subcommand (or part of one) that this build does not support yet.
pub const EXIT_UNSUPPORTED: i32 = 2;

fn unsupported(what: &str) -> i32 {
    eprintln!("Error: {what} is not supported by this build yet");
    EXIT_UNSUPPORTED
}

fn usage(command: &str) -> &'static str {
    match command {
        "install" => "pi install <source> [-l]",
        "remove" | "uninstall" => "pi remove <source> [-l]",
        "update" => "pi update [source|self|pi]",
        "list" => "pi list",
        "config" => "pi config [-l]",
        "auth" => "pi auth <command>",
        _ => "pi mcp <command>",
    }
}

/// Runs the subcommand `sub`; `args` are the arguments after the program name (the first is
/// the subcommand's name). Returns the exit code.
pub fn run(sub: Subcommand, args: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    let name = args.first().map(String::as_str).unwrap_or_default();
    let rest = args.get(1..).unwrap_or_default();
    if sub == Subcommand::Auth {
        // Its own help and options (auth_cmd.rs).
        return crate::auth_cmd::run(rest, agent_dir);
    }
    if sub == Subcommand::Mcp {
        // Its own help and options (`--` ends them: `pi mcp add x -- cmd --help`).
        return crate::mcp::cli::run(rest, cwd, agent_dir);
    }
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        println!("Usage:\n  {}", usage(name));
        return 0;
    }
    match sub {
        Subcommand::Auth => crate::auth_cmd::run(rest, agent_dir),
        Subcommand::Mcp => crate::mcp::cli::run(rest, cwd, agent_dir),
        Subcommand::Config => unsupported("`pi config` (it needs the interactive TUI)"),
        Subcommand::Update => unsupported("`pi update`"),
        Subcommand::List => list(rest, cwd, agent_dir),
        Subcommand::Install | Subcommand::Remove => {
            let mut local = false;
            let mut source: Option<&String> = None;
            for a in rest {
                match a.as_str() {
                    "-l" | "--local" => local = true,
                    "--approve" | "-a" | "--no-approve" | "-na" | "--offline" => {}
                    s if s.starts_with('-') => {
                        eprintln!("Unknown option {s} for \"{name}\".");
                        eprintln!("Use \"pi --help\" or \"{}\".", usage(name));
                        return 1;
                    }
                    _ if source.is_some() => {
                        eprintln!("Unexpected argument {a}.");
                        eprintln!("Usage: {}", usage(name));
                        return 1;
                    }
                    _ => source = Some(a),
                }
            }
            let Some(source) = source else {
                eprintln!("Missing {name} source.");
                eprintln!("Usage: {}", usage(name));
                return 1;
            };
            let file = settings_file(cwd, agent_dir, local);
            if sub == Subcommand::Install {
                install(source, &file, cwd)
            } else {
                remove(source, &file)
            }
        }
        Subcommand::Models => unsupported("this subcommand"),
    }
}

fn settings_file(cwd: &Path, agent_dir: &Path, local: bool) -> PathBuf {
    if local {
        cwd.join(".pi").join("settings.json")
    } else {
        agent_dir.join("settings.json")
    }
}

fn is_remote(source: &str) -> bool {
    [
        "npm:", "git:", "git+", "http://", "https://", "ssh://", "github:",
    ]
    .iter()
    .any(|p| source.starts_with(p))
        || source.starts_with("git@")
}

fn read_object(file: &Path) -> Result<Map<String, Value>, String> {
    match read_json_file(file) {
        JsonFile::Missing => Ok(Map::new()),
        JsonFile::Parsed(Value::Object(m)) => Ok(m),
        JsonFile::Parsed(_) => Err(format!("{} is not a JSON object", file.display())),
        JsonFile::Invalid(e) => Err(format!("could not read {}: {e}", file.display())),
    }
}

fn write_object(file: &Path, map: Map<String, Value>) -> Result<(), String> {
    let text = serde_json::to_string_pretty(&Value::Object(map)).map_err(|e| e.to_string())?;
    let write = || -> std::io::Result<()> {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = file.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, file)
    };
    write().map_err(|e| format!("could not write {}: {e}", file.display()))
}

fn package_source(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("source").and_then(Value::as_str),
        _ => None,
    }
}

fn install(source: &str, file: &Path, cwd: &Path) -> i32 {
    if is_remote(source) {
        return unsupported("installing npm and git packages");
    }
    let path = crate::file_args::absolute(cwd, source);
    if !path.exists() {
        eprintln!("Error: Path does not exist: {}", path.display());
        return 1;
    }
    let stored = path.display().to_string();
    let mut map = match read_object(file) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("Error: {e}");
            return 1;
        }
    };
    let packages = map
        .entry("packages")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(list) = packages else {
        eprintln!("Error: \"packages\" in {} is not an array", file.display());
        return 1;
    };
    if !list
        .iter()
        .any(|p| package_source(p) == Some(stored.as_str()))
    {
        list.push(Value::String(stored));
    }
    if let Err(e) = write_object(file, map) {
        eprintln!("Error: {e}");
        return 1;
    }
    println!("Installed {source}");
    0
}

fn remove(source: &str, file: &Path) -> i32 {
    let mut map = match read_object(file) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("Error: {e}");
            return 1;
        }
    };
    let absolute = std::env::current_dir()
        .map(|d| crate::file_args::absolute(&d, source).display().to_string())
        .unwrap_or_default();
    let mut removed = false;
    if let Some(Value::Array(list)) = map.get_mut("packages") {
        let before = list.len();
        list.retain(|p| {
            let s = package_source(p);
            s != Some(source) && s != Some(absolute.as_str())
        });
        removed = list.len() != before;
    }
    if !removed {
        eprintln!("No matching package found for {source}");
        return 1;
    }
    if let Err(e) = write_object(file, map) {
        eprintln!("Error: {e}");
        return 1;
    }
    println!("Removed {source}");
    0
}

fn list(rest: &[String], cwd: &Path, agent_dir: &Path) -> i32 {
    if let Some(a) = rest.first() {
        eprintln!("Unexpected argument {a}.");
        eprintln!("Usage: {}", usage("list"));
        return 1;
    }
    let sources = |file: &Path| -> Vec<String> {
        read_object(file)
            .ok()
            .and_then(|m| m.get("packages").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|p| {
                let source = package_source(p)?;
                let filtered = p.is_object()
                    && ["extensions", "skills", "prompts", "themes"]
                        .iter()
                        .any(|k| p.get(k).is_some());
                Some(if filtered {
                    format!("{source} (filtered)")
                } else {
                    source.to_string()
                })
            })
            .collect()
    };
    let user = sources(&agent_dir.join("settings.json"));
    let project = sources(&cwd.join(".pi").join("settings.json"));
    if user.is_empty() && project.is_empty() {
        println!("No packages installed.");
        return 0;
    }
    if !user.is_empty() {
        println!("User packages:");
        for s in &user {
            println!("  {s}");
        }
    }
    if !project.is_empty() {
        if !user.is_empty() {
            println!();
        }
        println!("Project packages:");
        for s in &project {
            println!("  {s}");
        }
    }
    0
}
