//! Drop-in at the command line (issue 10): every flag of upstream 1.6's `--help`, subcommands,
//! tool selection, 1.6 config values and key precedence, project trust, print-mode input and
//! the bash tool's environment — observed on what the fake LLM server receives.
//!
//! The binary under test is `PI_TEST_BIN` when set (to run these tests against an older build),
//! else this crate's `pi`.

use crate::common::{setup, RunRoot, LIVENESS};
use pi_ai::ThinkingLevel;
use pi_coding_agent::cli::{Cli, FlagValue, ListModels, Severity};
use pi_fakellm::{FakeLlm, RecordedRequest, Script, Turn};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn pi_bin() -> PathBuf {
    std::env::var_os("PI_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_pi")))
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `pi <args>` in the run root's cwd with its clean environment plus `extra`, feeding
/// `stdin` (closed at once when `None`).
fn run_pi(root: &RunRoot, args: &[&str], stdin: Option<&str>, extra: &[(&str, &str)]) -> Run {
    let mut child = Command::new(pi_bin())
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .envs(extra.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pi");
    {
        let mut sin = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            sin.write_all(text.as_bytes()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn tool_names(req: &RecordedRequest) -> Vec<String> {
    req.body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .or_else(|| t["name"].as_str())
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn texts(n: usize) -> Script {
    Script::new((0..n).map(|i| Turn::text(format!("answer {i}"))))
}

// ---------------------------------------------------------------------------------------------
// Flags

#[test]
fn every_upstream_help_flag_parses_to_its_meaning() {
    let p = |args: &[&str]| {
        let cli = Cli::parse(args);
        assert!(
            !cli.has_errors() && cli.unknown_flags.is_empty(),
            "{args:?}: {:?} {:?}",
            cli.diagnostics,
            cli.unknown_flags
        );
        cli
    };
    assert_eq!(
        p(&["--provider", "openai"]).provider.as_deref(),
        Some("openai")
    );
    assert_eq!(
        p(&["--model", "a/b:high"]).model.as_deref(),
        Some("a/b:high")
    );
    assert_eq!(p(&["--api-key", "k"]).api_key.as_deref(), Some("k"));
    assert_eq!(
        p(&["--system-prompt", "S"]).system_prompt.as_deref(),
        Some("S")
    );
    assert_eq!(
        p(&["--append-system-prompt", "A", "--append-system-prompt", "B"]).append_system_prompt,
        vec!["A", "B"]
    );
    for m in ["text", "json", "rpc"] {
        assert_eq!(p(&["--mode", m]).mode.as_deref(), Some(m));
    }
    for f in ["--print", "-p"] {
        let c = p(&[f, "hello", "world"]);
        assert!(c.print);
        assert_eq!(c.messages, vec!["hello", "world"]);
    }
    for f in ["--continue", "-c"] {
        assert!(p(&[f]).continue_session);
    }
    for f in ["--resume", "-r"] {
        assert!(p(&[f]).resume);
    }
    // `--session` and `--fork` take a file path or a full/partial id, kept as given (told
    // apart when the session is opened, session/resolve.rs).
    for v in ["abc", "01a2317a-7c9", "/tmp/s/2026_x.jsonl", "rel/x.jsonl"] {
        assert_eq!(p(&["--session", v]).session.as_deref(), Some(v));
        assert_eq!(p(&["--fork", v]).fork.as_deref(), Some(v));
    }
    assert_eq!(
        p(&["--session-id", "id1"]).session_id.as_deref(),
        Some("id1")
    );
    assert_eq!(
        p(&["--session-dir", "/s"]).session_dir,
        Some(PathBuf::from("/s"))
    );
    assert!(p(&["--no-session"]).no_session);
    let c = p(&[
        "-c",
        "--session-dir",
        "rel/dir",
        "--no-session",
        "--session-id",
        "x",
    ]);
    assert!(c.continue_session && c.no_session);
    assert_eq!(c.session_dir, Some(PathBuf::from("rel/dir")));
    assert_eq!(c.session_id.as_deref(), Some("x"));
    assert!(c.session.is_none() && c.fork.is_none() && !c.resume);
    // Without its value (at the end of the line) a session flag sets nothing; like upstream
    // it is then an unknown (extension) flag.
    for f in ["--session", "--session-id", "--fork", "--session-dir"] {
        let c = Cli::parse(&[f]);
        assert!(c.session.is_none() && c.session_id.is_none() && c.fork.is_none());
        assert!(c.session_dir.is_none());
        assert_eq!(c.unknown_flags, vec![(f[2..].to_string(), FlagValue::Bool)]);
    }
    for f in ["--name", "-n"] {
        assert_eq!(p(&[f, "My run"]).name.as_deref(), Some("My run"));
    }
    assert_eq!(
        p(&["--models", " a/*, ,*sonnet*:high "]).models,
        Some(vec!["a/*".to_string(), "*sonnet*:high".to_string()])
    );
    for f in ["--no-tools", "-nt"] {
        let c = p(&[f]);
        assert!(c.no_tools && c.name.is_none());
    }
    for f in ["--no-builtin-tools", "-nbt"] {
        assert!(p(&[f]).no_builtin_tools);
    }
    for f in ["--tools", "-t"] {
        assert_eq!(
            p(&[f, "read, gr*,mcp__x__*"]).tools,
            Some(vec!["read".into(), "gr*".into(), "mcp__x__*".into()])
        );
        assert_eq!(
            p(&[f, "+grep,-write"]).tools,
            Some(vec!["+grep".into(), "-write".into()])
        );
    }
    for f in ["--exclude-tools", "-xt"] {
        assert_eq!(
            p(&[f, "bash,ask_*"]).exclude_tools,
            Some(vec!["bash".into(), "ask_*".into()])
        );
    }
    assert_eq!(p(&["--thinking", "max"]).thinking, Some(ThinkingLevel::Max));
    assert_eq!(p(&["--thinking", "off"]).thinking, Some(ThinkingLevel::Off));
    for f in ["--extension", "-e"] {
        assert_eq!(
            p(&[f, "ext.js", f, "builtin:x"]).extension,
            vec!["ext.js", "builtin:x"]
        );
    }
    for f in ["--no-extensions", "-ne"] {
        assert!(p(&[f]).no_extensions);
    }
    assert!(p(&["--no-mcp"]).no_mcp);
    assert_eq!(p(&["--skill", "s"]).skill, vec!["s"]);
    for f in ["--no-skills", "-ns"] {
        assert!(p(&[f]).no_skills);
    }
    assert_eq!(p(&["--prompt-template", "t"]).prompt_template, vec!["t"]);
    for f in ["--no-prompt-templates", "-np"] {
        assert!(p(&[f]).no_prompt_templates);
    }
    assert_eq!(p(&["--theme", "th.json"]).theme, vec!["th.json"]);
    assert_eq!(
        p(&["--use-theme", "dark"]).use_theme.as_deref(),
        Some("dark")
    );
    assert!(p(&["--no-themes"]).no_themes);
    for f in ["--no-context-files", "-nc"] {
        assert!(p(&[f]).no_context_files);
    }
    let c = p(&["--export", "s.jsonl", "out.html"]);
    assert_eq!(c.export.as_deref(), Some("s.jsonl"));
    assert_eq!(c.messages, vec!["out.html"]);
    let c = p(&["--export", "s.jsonl"]);
    assert_eq!(c.export.as_deref(), Some("s.jsonl"));
    assert!(c.messages.is_empty());
    // Resource flags: repeatable paths, kept alongside the --no-* switches.
    let c = p(&["-ns", "--skill", "a", "--skill", "b/SKILL.md", "-np"]);
    assert!(c.no_skills && c.no_prompt_templates);
    assert_eq!(c.skill, vec!["a", "b/SKILL.md"]);
    let c = p(&[
        "--prompt-template",
        "t1",
        "--no-prompt-templates",
        "--prompt-template",
        "t2",
    ]);
    assert!(c.no_prompt_templates && !c.no_skills);
    assert_eq!(c.prompt_template, vec!["t1", "t2"]);
    assert_eq!(p(&["--list-models"]).list_models, Some(ListModels::All));
    assert_eq!(
        p(&["--list-models", "son"]).list_models,
        Some(ListModels::Search("son".into()))
    );
    assert!(p(&["--verbose"]).verbose);
    assert_eq!(
        p(&["--tui-mode", "regular"]).tui_mode.as_deref(),
        Some("regular")
    );
    for f in ["--approve", "-a"] {
        assert_eq!(p(&[f]).approve, Some(true));
    }
    for f in ["--no-approve", "-na"] {
        assert_eq!(p(&[f]).approve, Some(false));
    }
    assert!(p(&["--offline"]).offline);
    for f in ["--help", "-h"] {
        assert!(p(&[f]).help);
    }
    for f in ["--version", "-v"] {
        assert!(p(&[f]).version);
    }
    let c = p(&["-p", "--", "- a dash", "@f.txt"]);
    assert_eq!(c.messages, vec!["- a dash"]);
    assert_eq!(c.file_args, vec!["f.txt"]);
}

#[test]
fn short_flags_are_whole_words_and_edge_cases_match_upstream() {
    // `-nt` is --no-tools, never `-n t`.
    let c = Cli::parse(&["-nt", "-p", "hi"]);
    assert!(c.no_tools && c.print && c.name.is_none());
    assert_eq!(c.messages, vec!["hi"]);
    // -p does not take an @file or an option as its message.
    let c = Cli::parse(&["-p", "@a.md", "q"]);
    assert_eq!(c.file_args, vec!["a.md"]);
    assert_eq!(c.messages, vec!["q"]);
    // Unknown long flags are kept for extensions; unknown short ones are errors.
    let c = Cli::parse(&["--plan", "--depth=3", "--level", "x", "msg"]);
    assert_eq!(
        c.unknown_flags,
        vec![
            ("plan".to_string(), FlagValue::Bool),
            ("depth".to_string(), FlagValue::Text("3".into())),
            ("level".to_string(), FlagValue::Text("x".into())),
        ]
    );
    assert_eq!(c.messages, vec!["msg"]);
    let c = Cli::parse(&["-zz"]);
    assert_eq!(c.diagnostics[0].message, "Unknown option: -zz");
    // Invalid values.
    let c = Cli::parse(&["--mode", "tui"]);
    assert_eq!(c.diagnostics[0].severity, Severity::Error);
    let c = Cli::parse(&["--thinking", "huge"]);
    assert_eq!(c.diagnostics[0].severity, Severity::Warning);
    assert!(c.thinking.is_none());
    let c = Cli::parse(&["--tools", "read,+grep"]);
    assert!(c.has_errors() && c.tools.is_none());
    let c = Cli::parse(&["--tools", "+gr*"]);
    assert!(c.has_errors());
    assert!(Cli::parse(&["--name"]).has_errors());
    assert!(Cli::parse(&["--tui-mode", "weird"]).has_errors());
    assert!(Cli::parse(&["--use-theme"]).has_errors());
}

#[test]
fn interactive_only_flags_are_accepted_headless() {
    let (_fake, root) = setup(texts(0), crate::common::DEFAULT_MODEL);
    let mut agent = root.spawn_with(
        false,
        &[
            "--no-themes",
            "--theme",
            "t.json",
            "--use-theme",
            "dark",
            "--tui-mode",
            "regular",
            "--verbose",
            "--offline",
            "-ne",
            "-ns",
            "-np",
            "-nc",
            "--no-mcp",
        ],
    );
    let r = agent.request(json!({"id": "s", "type": "get_state"}));
    assert_eq!(r["success"], true, "{}", agent.dump());
}

#[test]
fn unknown_option_is_an_error_exit_1() {
    let (fake, root) = setup(texts(1), crate::common::DEFAULT_MODEL);
    let r = run_pi(&root, &["--frobnicate", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("Unknown option: --frobnicate"),
        "{}",
        r.stderr
    );
    assert!(fake.requests().is_empty());
}

/// `pi --help` and `pi -h` print exactly the text generated from the flag table (which the
/// platform crate's unit tests pin byte for byte), exit 0 and ask the model nothing.
#[test]
fn help_prints_the_table_text_and_exits_0() {
    let (fake, root) = setup(texts(1), crate::common::DEFAULT_MODEL);
    for flag in ["--help", "-h"] {
        let r = run_pi(&root, &[flag], None, &[]);
        assert_eq!(r.code, 0, "{flag}: {}", r.stderr);
        assert_eq!(r.stdout, pi_coding_agent::cli::help_with(""), "{flag}");
    }
    assert!(fake.requests().is_empty());
}

/// `-ns`, `--skill`, `-np`, `--prompt-template` and `--export` do what they say on a real run.
#[test]
fn resource_flags_and_export_have_their_meaning() {
    let skill = |name: &str| {
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n\nBody of {name}.\n")
    };
    let (fake, root) = setup(texts(6), crate::common::DEFAULT_MODEL);
    let write_agent = |rel: &str, text: &str| {
        let p = root.agent_dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write_agent("skills/usersk/SKILL.md", &skill("usersk"));
    write_agent("prompts/tpl.md", "Template says $1");
    root.write_cwd_file("clisk/SKILL.md", &skill("clisk"));
    root.write_cwd_file("clitpl/other.md", "Other says $1");
    let body = |i: usize| fake.llm_requests()[i].body_text();

    // Skills: discovered by default, -ns drops discovery, --skill still loads.
    let r = run_pi(&root, &["--no-session", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(body(0).contains("usersk"), "{}", body(0));
    let r = run_pi(
        &root,
        &["--no-session", "-ns", "--skill", "clisk", "-p", "hi"],
        None,
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!body(1).contains("usersk") && body(1).contains("clisk"));

    // Prompt templates: /tpl expands; -np sends it literally; --prompt-template adds one.
    let r = run_pi(&root, &["--no-session", "-p", "/tpl one"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        first_user_text(&fake.llm_requests()[2]),
        "Template says one"
    );
    let r = run_pi(
        &root,
        &[
            "--no-session",
            "-np",
            "--prompt-template",
            "clitpl",
            "-p",
            "/tpl one",
        ],
        None,
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(first_user_text(&fake.llm_requests()[3]), "/tpl one");
    let r = run_pi(
        &root,
        &[
            "--no-session",
            "-np",
            "--prompt-template",
            "clitpl",
            "-p",
            "/other two",
        ],
        None,
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(first_user_text(&fake.llm_requests()[4]), "Other says two");

    // --export: a session this build wrote becomes an HTML page; no model call.
    let r = run_pi(&root, &["-p", "for the export"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let session = root
        .session_files()
        .into_iter()
        .next()
        .expect("a session file");
    let calls = fake.llm_requests().len();
    let r = run_pi(
        &root,
        &["--export", session.to_str().unwrap(), "page.html"],
        None,
        &[],
    );
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "Exported to: page.html\n"),
        "{}",
        r.stderr
    );
    let html = std::fs::read_to_string(root.cwd.join("page.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") || html.starts_with("<!doctype html>"));
    assert_eq!(fake.llm_requests().len(), calls, "--export never prompts");
    let r = run_pi(&root, &["--export", "missing.jsonl"], None, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("File not found"), "{}", r.stderr);
}

#[test]
fn subcommands_are_commands_never_prompts() {
    let (fake, root) = setup(texts(4), crate::common::DEFAULT_MODEL);
    let r = run_pi(&root, &["list"], None, &[]);
    assert_eq!(
        (r.code, r.stdout.trim()),
        (0, "No packages installed."),
        "{}",
        r.stderr
    );
    // `pi mcp list` is built (issue 13): nothing configured is not an error.
    let r = run_pi(&root, &["mcp", "list"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("No MCP servers configured."),
        "{}",
        r.stdout
    );
    // `pi auth` is built (issue 14): `login` without a provider is a usage error.
    let r = run_pi(&root, &["auth", "login"], None, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.starts_with("Usage: pi auth login"), "{}", r.stderr);
    // `pi mcp login` is built too: an unknown server is an error, not a prompt.
    let r = run_pi(&root, &["mcp", "login", "x"], None, &[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("No MCP server named \"x\""),
        "{}",
        r.stderr
    );
    for args in [&["update"][..], &["config"]] {
        let r = run_pi(&root, args, None, &[]);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("not supported"), "{args:?}: {}", r.stderr);
    }
    // npm sources are installed with npm (tests/all/packages.rs); npm kept offline here fails.
    let cache = root.tmp.join("npm-cache").display().to_string();
    let r = run_pi(
        &root,
        &["install", "npm:some-pkg"],
        None,
        &[("npm_config_offline", "true"), ("npm_config_cache", &cache)],
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("Error: npm install some-pkg --prefix "),
        "{}",
        r.stderr
    );
    // A local package: install, list, remove.
    std::fs::create_dir_all(root.cwd.join("mypkg")).unwrap();
    let r = run_pi(&root, &["install", "./mypkg"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run_pi(&root, &["list"], None, &[]);
    let abs = root.cwd.join("mypkg");
    assert!(
        r.stdout.contains("User packages:") && r.stdout.contains(&abs.display().to_string()),
        "{}",
        r.stdout
    );
    let r = run_pi(&root, &["remove", &abs.display().to_string()], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = run_pi(&root, &["uninstall", "nothing-here"], None, &[]);
    assert_eq!(r.code, 1);
    assert!(
        fake.requests().is_empty(),
        "no subcommand reached the model"
    );
}

// ---------------------------------------------------------------------------------------------
// Tool selection

fn tools_for(args: &[&str], settings: Option<Value>) -> Vec<String> {
    let (fake, root) = setup(texts(1), crate::common::DEFAULT_MODEL);
    if let Some(s) = settings {
        root.merge_settings(s);
    }
    let mut all = vec!["--no-session"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-p", "hi"]);
    let r = run_pi(&root, &all, None, &[]);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    let reqs = fake.llm_requests();
    assert_eq!(reqs.len(), 1, "{args:?}: {}", r.stderr);
    tool_names(&reqs[0])
}

#[test]
fn tool_flags_select_tools_as_upstream() {
    let v = |names: &[&str]| {
        names
            .iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(tools_for(&[], None), v(&["read", "bash", "edit", "write"]));
    assert_eq!(tools_for(&["-nt"], None), v(&[]));
    assert_eq!(tools_for(&["-nbt"], None), v(&[]));
    assert_eq!(tools_for(&["-t", "read,gr*"], None), v(&["read", "grep"]));
    assert_eq!(
        tools_for(&["--tools", "+grep,-write"], None),
        v(&["read", "bash", "edit", "grep"])
    );
    assert_eq!(tools_for(&["-xt", "b*,edit"], None), v(&["read", "write"]));
    assert_eq!(
        tools_for(&[], Some(json!({"defaultTools": ["+ls", "-bash"]}))),
        v(&["read", "edit", "write", "ls"])
    );
    assert_eq!(
        tools_for(&[], Some(json!({"defaultTools": ["find", "read"]}))),
        v(&["find", "read"])
    );
}

// ---------------------------------------------------------------------------------------------
// Config values and key precedence (config.md §5.2–§5.3)

fn bearer_with(api_key: &str, auth: Option<Value>, args: &[&str], env: &[(&str, &str)]) -> String {
    let fake = FakeLlm::spawn(texts(1)).unwrap();
    let root = RunRoot::new(fake.port());
    let mut models = crate::common::models_json(fake.port());
    models["providers"]["fake-openai"]["apiKey"] = json!(api_key);
    root.write_agent_file("models.json", &models);
    if let Some(a) = auth {
        root.write_agent_file("auth.json", &a);
    }
    let mut all = vec!["--no-session"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-p", "hi"]);
    let r = run_pi(&root, &all, None, env);
    assert_eq!(r.code, 0, "{api_key}: {}", r.stderr);
    let reqs = fake.llm_requests();
    reqs[0].header("authorization").unwrap_or("").to_string()
}

#[test]
fn models_json_api_key_forms_follow_1_6() {
    let env = [("MYKEY", "secret")];
    assert_eq!(bearer_with("$MYKEY", None, &[], &env), "Bearer secret");
    assert_eq!(
        bearer_with("${MYKEY}-x", None, &[], &env),
        "Bearer secret-x"
    );
    assert_eq!(bearer_with("MYKEY", None, &[], &env), "Bearer MYKEY");
    assert_eq!(bearer_with("a$$b$!c", None, &[], &env), "Bearer a$b!c");
    assert_eq!(
        bearer_with("!printf cmd-key", None, &[], &env),
        "Bearer cmd-key"
    );
}

#[test]
fn key_precedence_cli_then_auth_json_then_models_json_then_env() {
    let auth = json!({"fake-openai": {"type": "api_key", "key": "from-auth"}});
    assert_eq!(
        bearer_with(
            "from-models",
            Some(auth.clone()),
            &["--api-key", "from-cli"],
            &[]
        ),
        "Bearer from-cli"
    );
    assert_eq!(
        bearer_with("from-models", Some(auth), &[], &[]),
        "Bearer from-auth"
    );
    // auth.json `env` values beat the process environment.
    let auth_env = json!({"fake-openai": {"type": "api_key", "key": "$AUTHVAR",
                                          "env": {"AUTHVAR": "from-auth-env"}}});
    assert_eq!(
        bearer_with(
            "from-models",
            Some(auth_env),
            &[],
            &[("AUTHVAR", "from-process")]
        ),
        "Bearer from-auth-env"
    );

    // A built-in provider name: models.json apiKey beats OPENAI_API_KEY; an unresolvable one
    // falls back to it.
    let with_openai = |api_key: &str| {
        let fake = FakeLlm::spawn(texts(1)).unwrap();
        let root = RunRoot::with_model(fake.port(), "openai/fake-oa");
        root.write_agent_file(
            "models.json",
            &json!({"providers": {"openai": {
                "api": "openai-completions", "apiKey": api_key,
                "baseUrl": format!("http://127.0.0.1:{}/v1", fake.port()),
                "models": [{"id": "fake-oa", "name": "Fake OA"}]}}}),
        );
        let r = run_pi(
            &root,
            &["--no-session", "-p", "hi"],
            None,
            &[("OPENAI_API_KEY", "from-env")],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        fake.llm_requests()[0]
            .header("authorization")
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(with_openai("from-models-json"), "Bearer from-models-json");
    assert_eq!(with_openai("$NOT_SET_ANYWHERE"), "Bearer from-env");
}

#[test]
fn models_json_commands_run_per_request_auth_json_commands_once() {
    let fake = FakeLlm::spawn(texts(4)).unwrap();
    let root = RunRoot::new(fake.port());
    let count_m = root.path().join("count-models");
    let count_a = root.path().join("count-auth");
    let mut models = crate::common::models_json(fake.port());
    models["providers"]["fake-openai"]["apiKey"] =
        json!(format!("!echo x >> {}; echo mkey", count_m.display()));
    models["providers"]["fake-anthropic"]["apiKey"] = json!("unused");
    root.write_agent_file("models.json", &models);
    root.write_agent_file(
        "auth.json",
        &json!({"fake-anthropic": {"type": "api_key",
                "key": format!("!echo x >> {}; echo akey", count_a.display())}}),
    );
    let mut agent = root.spawn();
    for (i, model) in [
        ("fake-openai", "fake-gpt-mini"),
        ("fake-openai", "fake-gpt-mini"),
        ("fake-anthropic", "fake-claude-haiku"),
        ("fake-anthropic", "fake-claude-haiku"),
    ]
    .iter()
    .enumerate()
    {
        let r = agent.request(json!({"id": format!("m{i}"), "type": "set_model",
                                     "provider": model.0, "modelId": model.1}));
        assert_eq!(r["success"], true, "{}", agent.dump());
        agent.send(json!({"id": format!("p{i}"), "type": "prompt", "message": "hi"}));
        agent.wait_for(|v| v["type"] == "agent_settled", LIVENESS);
        // The next wait must see a new settle: wait until the request count grows.
        assert!(fake.wait_requests(i + 1, LIVENESS));
    }
    let lines = |p: &PathBuf| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let reqs = fake.llm_requests();
    assert_eq!(reqs[0].header("authorization"), Some("Bearer mkey"));
    assert_eq!(reqs[3].header("x-api-key"), Some("akey"));
    assert!(lines(&count_m) >= 2, "models.json command ran per request");
    assert_eq!(lines(&count_a), 1, "auth.json command result is cached");
}

// ---------------------------------------------------------------------------------------------
// Project trust (docs/security.md)

fn trust_root() -> (FakeLlm, RunRoot) {
    let (fake, root) = setup(texts(1), crate::common::DEFAULT_MODEL);
    root.write_cwd_file(
        ".pi/settings.json",
        r#"{"defaultProvider": "fake-anthropic", "defaultModel": "fake-claude-haiku"}"#,
    );
    root.write_cwd_file(".pi/SYSTEM.md", "PROJECT-SYSTEM-PROMPT");
    (fake, root)
}

fn served_api(fake: &FakeLlm) -> (String, String) {
    let r = &fake.llm_requests()[0];
    (r.api.clone(), r.body_text())
}

#[test]
fn untrusted_project_settings_and_system_md_are_skipped_with_a_notice() {
    let (fake, root) = trust_root();
    let r = run_pi(&root, &["--no-session", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (api, body) = served_api(&fake);
    assert_eq!(api, "openai", "the project's model was not used");
    assert!(!body.contains("PROJECT-SYSTEM-PROMPT"));
    assert!(
        r.stderr.contains(".pi/settings.json") && r.stderr.contains("--approve"),
        "{}",
        r.stderr
    );
}

#[test]
fn approve_flag_trusts_the_project_for_one_run() {
    let (fake, root) = trust_root();
    let r = run_pi(&root, &["--no-session", "-a", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let (api, body) = served_api(&fake);
    assert_eq!(api, "anthropic");
    assert!(body.contains("PROJECT-SYSTEM-PROMPT"));
    assert!(
        !root.agent_dir.join("trust.json").exists(),
        "--approve saves nothing"
    );
}

#[test]
fn trust_json_and_default_project_trust_are_remembered() {
    let (fake, root) = trust_root();
    root.write_agent_file("trust.json", &json!({root.cwd.display().to_string(): true}));
    let r = run_pi(&root, &["--no-session", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(served_api(&fake).0, "anthropic");

    // --no-approve beats the saved decision.
    let (fake, root) = trust_root();
    root.write_agent_file("trust.json", &json!({root.cwd.display().to_string(): true}));
    let r = run_pi(&root, &["--no-session", "-na", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(served_api(&fake).0, "openai");

    let (fake, root) = trust_root();
    root.merge_settings(json!({"defaultProjectTrust": "always"}));
    let r = run_pi(&root, &["--no-session", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(served_api(&fake).0, "anthropic");
}

#[test]
fn agents_override_replaces_agents_md_without_trust() {
    let (fake, root) = setup(texts(1), crate::common::DEFAULT_MODEL);
    root.write_cwd_file("AGENTS.md", "PLAIN-AGENTS");
    root.write_cwd_file("AGENTS.override.md", "OVERRIDE-AGENTS");
    let r = run_pi(&root, &["--no-session", "-p", "hi"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let body = served_api(&fake).1;
    assert!(body.contains("OVERRIDE-AGENTS") && !body.contains("PLAIN-AGENTS"));
}

// ---------------------------------------------------------------------------------------------
// Print and json input

fn first_user_text(req: &RecordedRequest) -> String {
    let msgs = req.body["messages"].as_array().unwrap();
    let user = msgs.iter().find(|m| m["role"] == "user").unwrap();
    match &user["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

#[test]
fn piped_stdin_is_prepended_and_no_mode_means_print() {
    let (fake, root) = setup(texts(1), crate::common::DEFAULT_MODEL);
    // No -p and no --mode: stdin and stdout are pipes, so print mode (not RPC).
    let r = run_pi(
        &root,
        &["--no-session", "summarize"],
        Some("LOG LINE\n"),
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "answer 0");
    assert_eq!(
        first_user_text(&fake.llm_requests()[0]),
        "LOG LINEsummarize"
    );
}

#[test]
fn at_file_arguments_are_inlined_and_images_attached() {
    let (fake, root) = setup(texts(2), "fake-openai/fake-gpt");
    root.write_cwd_file("notes.txt", "alpha\nbeta");
    let png = crate::rpc_images::png(1, 1);
    std::fs::write(root.cwd.join("pic.png"), &png).unwrap();
    let r = run_pi(
        &root,
        &[
            "--no-session",
            "-p",
            "@notes.txt",
            "@pic.png",
            "what is in it",
        ],
        None,
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let req = &fake.llm_requests()[0];
    let notes = root.cwd.join("notes.txt");
    let pic = root.cwd.join("pic.png");
    assert_eq!(
        first_user_text(req),
        format!(
            "<file name=\"{}\">\nalpha\nbeta\n</file>\n<file name=\"{}\"></file>\nwhat is in it",
            notes.display(),
            pic.display()
        )
    );
    assert!(
        req.body_text().contains("data:image/png;base64,"),
        "image attached"
    );

    let r = run_pi(
        &root,
        &["--no-session", "-p", "@missing.txt", "q"],
        None,
        &[],
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("File not found:"), "{}", r.stderr);

    // A big @file image is resized for the model at run time; a corrupt one is an error.
    std::fs::write(root.cwd.join("wide.png"), crate::rpc_images::png(2400, 10)).unwrap();
    std::fs::write(root.cwd.join("cut.png"), &png[..30]).unwrap();
    let r = run_pi(&root, &["--no-session", "-p", "@wide.png", "q"], None, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let req = fake.llm_requests().pop().unwrap();
    assert!(
        first_user_text(&req).ends_with(
            "q\n\n[Image: original 2400x10, displayed at 2000x8. Multiply coordinates by 1.20 to map to original image.]"
        ),
        "{}",
        first_user_text(&req)
    );
    let before = fake.llm_requests().len();
    let r = run_pi(&root, &["--no-session", "-p", "@cut.png", "q"], None, &[]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("Could not read image file"),
        "{}",
        r.stderr
    );
    assert_eq!(fake.llm_requests().len(), before, "nothing sent");
}

// ---------------------------------------------------------------------------------------------
// The bash tool's environment

#[test]
fn bash_tool_env_carries_session_vars_and_rpc_bash_only_markers() {
    let script = Script::new([
        Turn::tool_call(
            "bash",
            json!({"command": "echo \"[$PI_SESSION_ID][$PI_PROVIDER][$PI_MODEL][$PI_REASONING_LEVEL][$AI_AGENT][$PI_CODING_AGENT][${PI_SESSION_FILE:+file}]\""}),
        ),
        Turn::text("done"),
    ]);
    let (fake, root) = setup(script, crate::common::DEFAULT_MODEL);
    let mut agent = root.spawn_with_session();
    let state = agent.request(json!({"id": "s", "type": "get_state"}));
    let sid = state["data"]["sessionId"].as_str().unwrap().to_string();
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.wait_event("agent_settled");
    let reqs = fake.llm_requests();
    let body = reqs[1].body_text();
    let want = format!("[{sid}][fake-openai][fake-gpt-mini][off][pi][true][file]");
    assert!(body.contains(&want), "want {want} in {body}");

    let r = agent.request(json!({"id": "b", "type": "bash",
        "command": "echo \"[$PI_SESSION_ID][$PI_MODEL][$AI_AGENT][$PI_CODING_AGENT]\""}));
    assert_eq!(
        r["data"]["output"].as_str().unwrap().trim(),
        "[][][pi][true]",
        "{r}"
    );
}
