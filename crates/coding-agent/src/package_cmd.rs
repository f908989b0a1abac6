//! Subcommands other than `models`: `pi install|remove|uninstall|update|list|config`,
//! `pi auth …`, `pi mcp …` (upstream-1.6-notes.md item 25; upstream 1.6 `docs/packages.md`,
//! `docs/cli.md` "Package commands"). They are commands, never prompts to the model.
//!
//! `install`, `remove`/`uninstall`, `list` and the package part of `update` work as upstream
//! (npm, git and local sources, [`crate::packages`]): the same arguments, stdout/stderr lines
//! and exit codes (0, or 1 with `Error: <message>`). What cannot work in this build —
//! updating pi itself (`pi update`, `pi update pi|self`, the self part of `--all`), `update
//! --models`, `config` (a TUI) — fails with a clear message on stderr and exit 2.

use crate::cli::Subcommand;
use crate::config::{read_json_file, JsonFile};
use crate::packages::source::Scope;
use crate::packages::{entries_of, offline, ChildOutput, PackageEntry, PackageManager};
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
        "install" | "remove" | "uninstall" | "update" | "list" => usage_line(command),
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
    if sub == Subcommand::Config {
        return unsupported("`pi config` (it needs the interactive TUI)");
    }
    if sub == Subcommand::Models {
        return unsupported("this subcommand");
    }
    let opts = match parse_options(sub, name, rest) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let writes_project = opts.local && matches!(sub, Subcommand::Install | Subcommand::Remove);
    let global = read_object(&agent_dir.join("settings.json")).unwrap_or_default();
    let trusted = project_trusted(cwd, agent_dir, &global, opts.approve);
    if writes_project && !trusted {
        eprintln!("Project is not trusted. Use --approve to modify local package config.");
        return 1;
    }
    let npm_command: Vec<String> = global
        .get("npmCommand")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let pm = PackageManager::new(cwd, agent_dir, trusted, npm_command, ChildOutput::Inherit);
    let scope = if opts.local {
        Scope::Project
    } else {
        Scope::User
    };
    let file = settings_file(cwd, agent_dir, opts.local);
    match sub {
        Subcommand::Install => {
            let source = opts.source.unwrap_or_default();
            install(&pm, &source, scope, &file)
        }
        Subcommand::Remove => {
            let source = opts.source.unwrap_or_default();
            remove(&pm, &source, scope, &file)
        }
        Subcommand::List => list(&pm, cwd, agent_dir, trusted),
        _ => update(&pm, &opts, cwd, agent_dir, trusted),
    }
}

/// What the package commands were given.
#[derive(Debug, Default)]
struct Options {
    local: bool,
    approve: Option<bool>,
    source: Option<String>,
    /// `update` target: `None` = pi itself.
    update_packages: bool,
    update_self: bool,
    update_models: bool,
    /// Plain `pi update`: say that packages are skipped.
    skipped_note: bool,
}

fn usage_line(name: &str) -> &'static str {
    match name {
        "install" => "pi install <source> [-l] [--approve|--no-approve]",
        "remove" | "uninstall" => "pi remove <source> [-l] [--approve|--no-approve]",
        "update" => "pi update [source|self|pi] [--self|--extensions|--models|--all] [--extension <source>] [--approve|--no-approve] [--force]",
        _ => "pi list [--approve|--no-approve]",
    }
}

/// Parses the arguments as upstream's `parsePackageCommand`; `Err(exit code)` after printing
/// the problem (unknown option, missing value, stray argument, conflicting options, missing
/// source).
fn parse_options(sub: Subcommand, name: &str, rest: &[String]) -> Result<Options, i32> {
    let is_update = sub == Subcommand::Update;
    let mut o = Options::default();
    let (mut invalid_opt, mut invalid_arg, mut missing_val, mut conflict) = (
        None::<String>,
        None::<String>,
        None::<String>,
        None::<String>,
    );
    let (mut self_f, mut ext_f, mut models_f, mut all_f) = (false, false, false, false);
    let mut ext_source: Option<String> = None;
    let mut i = 0;
    while i < rest.len() {
        let a = rest[i].as_str();
        let only_update = |flag: &mut bool, bad: &mut Option<String>| {
            if is_update {
                *flag = true;
            } else if bad.is_none() {
                *bad = Some(a.to_string());
            }
        };
        match a {
            "-l" | "--local" => {
                if matches!(sub, Subcommand::Install | Subcommand::Remove) {
                    o.local = true;
                } else if invalid_opt.is_none() {
                    invalid_opt = Some(a.into());
                }
            }
            "--self" => only_update(&mut self_f, &mut invalid_opt),
            "--extensions" => only_update(&mut ext_f, &mut invalid_opt),
            "--models" => only_update(&mut models_f, &mut invalid_opt),
            "--all" => only_update(&mut all_f, &mut invalid_opt),
            "--force" => {
                let mut ignored = false;
                only_update(&mut ignored, &mut invalid_opt);
            }
            "--approve" | "-a" => o.approve = Some(true),
            "--no-approve" | "-na" => o.approve = Some(false),
            "--extension" => {
                if !is_update {
                    invalid_opt.get_or_insert_with(|| a.into());
                } else {
                    match rest.get(i + 1) {
                        Some(v) if !v.starts_with('-') => {
                            if ext_source.is_some() {
                                conflict.get_or_insert_with(|| {
                                    "--extension can only be provided once".into()
                                });
                            } else {
                                ext_source = Some(v.clone());
                            }
                            i += 1;
                        }
                        _ => {
                            missing_val.get_or_insert_with(|| a.into());
                        }
                    }
                }
            }
            s if s.starts_with('-') => {
                invalid_opt.get_or_insert_with(|| s.into());
            }
            _ => {
                if o.source.is_none() {
                    o.source = Some(a.into());
                } else {
                    invalid_arg.get_or_insert_with(|| a.into());
                }
            }
        }
        i += 1;
    }
    if is_update {
        let positional = o.source.clone();
        if all_f && (self_f || ext_f || models_f || ext_source.is_some()) {
            conflict.get_or_insert_with(|| {
                "--all cannot be combined with --self, --extensions, --models, or --extension"
                    .into()
            });
        }
        if all_f && positional.is_some() {
            conflict
                .get_or_insert_with(|| "--all cannot be combined with a positional source".into());
        }
        if models_f {
            if self_f || ext_f || all_f || ext_source.is_some() {
                conflict.get_or_insert_with(|| {
                    "--models cannot be combined with --self, --extensions, --all, or --extension".into()
                });
            }
            if positional.is_some() {
                conflict.get_or_insert_with(|| {
                    "--models cannot be combined with a positional source".into()
                });
            }
            o.update_models = true;
        } else if let Some(src) = ext_source {
            if self_f || ext_f || all_f {
                conflict.get_or_insert_with(|| {
                    "--extension cannot be combined with --self, --extensions, or --all".into()
                });
            }
            if positional.is_some() {
                conflict.get_or_insert_with(|| {
                    "--extension cannot be combined with a positional source".into()
                });
            }
            o.update_packages = true;
            o.source = Some(src);
        } else if let Some(src) = positional {
            if src == "self" || src == "pi" {
                o.update_self = true;
                o.update_packages = ext_f;
                o.source = None;
            } else {
                if ext_f || self_f || all_f {
                    conflict.get_or_insert_with(|| {
                        "positional update targets cannot be combined with --self, --extensions, or --all".into()
                    });
                }
                o.update_packages = true;
            }
        } else if all_f || (self_f && ext_f) {
            o.update_self = true;
            o.update_packages = true;
        } else if ext_f {
            o.update_packages = true;
        } else {
            o.update_self = true;
            o.skipped_note = true;
        }
    }
    let usage = usage_line(name);
    if let Some(opt) = invalid_opt {
        eprintln!("Unknown option {opt} for \"{}\".", command_name(sub));
        eprintln!("Use \"pi --help\" or \"{usage}\".");
        return Err(1);
    }
    if let Some(v) = missing_val {
        eprintln!("Missing value for {v}.");
        eprintln!("Usage: {usage}");
        return Err(1);
    }
    if let Some(a) = invalid_arg {
        eprintln!("Unexpected argument {a}.");
        eprintln!("Usage: {usage}");
        return Err(1);
    }
    if let Some(c) = conflict {
        eprintln!("{c}");
        eprintln!("Usage: {usage}");
        return Err(1);
    }
    if matches!(sub, Subcommand::Install | Subcommand::Remove) && o.source.is_none() {
        eprintln!("Missing {} source.", command_name(sub));
        eprintln!("Usage: {usage}");
        return Err(1);
    }
    Ok(o)
}

fn command_name(sub: Subcommand) -> &'static str {
    match sub {
        Subcommand::Install => "install",
        Subcommand::Remove => "remove",
        Subcommand::Update => "update",
        _ => "list",
    }
}

/// Whether the cwd's project may be used: the same decision as a run (`--approve` /
/// `--no-approve`, `trust.json`, `defaultProjectTrust`; [`crate::trust`]).
fn project_trusted(
    cwd: &Path,
    agent_dir: &Path,
    global: &Map<String, Value>,
    approve: Option<bool>,
) -> bool {
    let policy = crate::trust::TrustPolicy {
        cli_override: approve,
        default_trust: global
            .get("defaultProjectTrust")
            .and_then(Value::as_str)
            .unwrap_or("ask")
            .to_string(),
        store: crate::trust::TrustStore::new(agent_dir),
        home: crate::config::home_dir(),
    };
    policy.decide(cwd).trusted
}

fn settings_file(cwd: &Path, agent_dir: &Path, local: bool) -> PathBuf {
    if local {
        cwd.join(".pi").join("settings.json")
    } else {
        agent_dir.join("settings.json")
    }
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

/// Adds `source` to `packages` of `file` (upstream `addSourceToSettings`): an entry of the
/// same identity is rewritten to the new source string (an object keeps its filters).
fn add_to_settings(
    pm: &PackageManager,
    source: &str,
    scope: Scope,
    file: &Path,
) -> Result<(), String> {
    let mut map = read_object(file)?;
    let stored = pm.settings_form(source, scope);
    let id = pm.identity(source, None);
    let list = map
        .entry("packages")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(list) = list else {
        return Err(format!(
            "\"packages\" in {} is not an array",
            file.display()
        ));
    };
    let found = list
        .iter()
        .position(|p| package_source(p).is_some_and(|s| pm.identity(s, Some(scope)) == id));
    match found {
        Some(i) => {
            if package_source(&list[i]) == Some(stored.as_str()) {
                return Ok(());
            }
            match &mut list[i] {
                Value::Object(o) => {
                    o.insert("source".into(), Value::String(stored));
                }
                other => *other = Value::String(stored),
            }
        }
        None => list.push(Value::String(stored)),
    }
    write_object(file, map)
}

/// Removes the entries of `source`'s identity from `packages` of `file`; whether any was.
fn remove_from_settings(
    pm: &PackageManager,
    source: &str,
    scope: Scope,
    file: &Path,
) -> Result<bool, String> {
    let mut map = read_object(file)?;
    let id = pm.identity(source, None);
    let Some(Value::Array(list)) = map.get_mut("packages") else {
        return Ok(false);
    };
    let before = list.len();
    list.retain(|p| package_source(p).is_none_or(|s| pm.identity(s, Some(scope)) != id));
    if list.len() == before {
        return Ok(false);
    }
    write_object(file, map)?;
    Ok(true)
}

fn install(pm: &PackageManager, source: &str, scope: Scope, file: &Path) -> i32 {
    println!("Installing {source}...");
    let result = pm
        .install(source, scope)
        .map_err(|e| e.to_string())
        .and_then(|()| add_to_settings(pm, source, scope, file));
    match result {
        Ok(()) => {
            println!("Installed {source}");
            0
        }
        Err(e) => {
            eprintln!("Error: {e}");
            1
        }
    }
}

fn remove(pm: &PackageManager, source: &str, scope: Scope, file: &Path) -> i32 {
    println!("Removing {source}...");
    let result = pm
        .remove_files(source, scope)
        .map_err(|e| e.to_string())
        .and_then(|()| remove_from_settings(pm, source, scope, file));
    match result {
        Ok(true) => {
            println!("Removed {source}");
            0
        }
        Ok(false) => {
            eprintln!("No matching package found for {source}");
            1
        }
        Err(e) => {
            eprintln!("Error: {e}");
            1
        }
    }
}

/// The `packages` of the agent-dir settings and, for a trusted project, `.pi/settings.json`.
fn configured(cwd: &Path, agent_dir: &Path, trusted: bool) -> Vec<PackageEntry> {
    let mut all = entries_of(
        &read_object(&agent_dir.join("settings.json")).unwrap_or_default(),
        Scope::User,
    );
    if trusted {
        all.extend(entries_of(
            &read_object(&cwd.join(".pi").join("settings.json")).unwrap_or_default(),
            Scope::Project,
        ));
    }
    all
}

fn list(pm: &PackageManager, cwd: &Path, agent_dir: &Path, trusted: bool) -> i32 {
    let all = configured(cwd, agent_dir, trusted);
    if all.is_empty() {
        println!("No packages installed.");
        return 0;
    }
    let print = |e: &PackageEntry| {
        if e.filter.is_some() {
            println!("  {} (filtered)", e.source);
        } else {
            println!("  {}", e.source);
        }
        if let Some(p) = pm.installed_path(&e.source, e.scope) {
            println!("    {}", p.display());
        }
    };
    let user: Vec<&PackageEntry> = all.iter().filter(|e| e.scope == Scope::User).collect();
    let project: Vec<&PackageEntry> = all.iter().filter(|e| e.scope == Scope::Project).collect();
    if !user.is_empty() {
        println!("User packages:");
        user.iter().for_each(|e| print(e));
    }
    if !project.is_empty() {
        if !user.is_empty() {
            println!();
        }
        println!("Project packages:");
        project.iter().for_each(|e| print(e));
    }
    0
}

fn update(pm: &PackageManager, o: &Options, cwd: &Path, agent_dir: &Path, trusted: bool) -> i32 {
    if o.update_models {
        return unsupported("`pi update --models`");
    }
    if o.update_packages {
        let all = configured(cwd, agent_dir, trusted);
        let report = match pm.update(&all, o.source.as_deref()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("Error: {e}");
                return 1;
            }
        };
        let src = o.source.as_deref();
        if offline() {
            println!("Skipped package updates (offline mode)");
        } else if report.updated.is_empty() && report.warnings > 0 {
            match src {
                Some(s) => println!("{s} was not updated, see the warnings above"),
                None => println!("No packages were updated, see the warnings above"),
            }
        } else if report.updated.is_empty() {
            match src {
                Some(s) => println!("{s} is already up to date"),
                None => println!("Packages are already up to date"),
            }
        } else {
            let n = report.updated.len();
            println!("Updated {n} package{}:", if n == 1 { "" } else { "s" });
            for u in &report.updated {
                println!("  {}", u.line);
            }
        }
    }
    if o.update_self {
        if o.skipped_note {
            println!("Extensions are skipped. Run pi update --extensions to update extensions.");
        }
        return unsupported("updating pi itself (update it the way it was installed)");
    }
    0
}
