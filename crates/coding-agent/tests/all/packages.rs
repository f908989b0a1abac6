//! Pi packages (issue 22; upstream 1.6 `docs/packages.md`, `docs/cli.md` "Package commands"):
//! `pi install|remove|update|list` with npm, git and local sources, and the packages' resources
//! in `--mode rpc`. No public network: npm talks to a fake registry on 127.0.0.1 (packuments
//! and tarballs built here with the system `tar`), git clones a local repository through a
//! `url.<base>.insteadOf` rewrite in a test-only git config.
//!
//! What is asserted was recorded from upstream 1.6's `pi` against the same fakes: the files
//! (`<agent>/npm/{package.json,.gitignore,node_modules/<name>}`, `<agent>/git/<host>/<path>`,
//! `<agent>/tmp/extensions/npm/f35b2129/…`), the stdout lines, exit codes, and the
//! `sourceInfo` of package resources (`source` = the settings entry, `origin: "package"`,
//! `baseDir` = package root).

use crate::common::*;
use pi_fakellm::{Script, Turn};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

/// The demo package's extension: one command and one tool.
const DEMO_EXT: &str = r#"export default function (pi) {
  pi.registerCommand("demo-cmd", { description: "Demo command", handler: async () => {} });
  pi.registerTool({ name: "demo_tool", label: "Demo", description: "A demo tool",
    parameters: { type: "object", properties: {} },
    execute: async () => ({ content: [{ type: "text", text: "ok" }] }) });
}
"#;

/// Published packages: name → `(version, tarball)` in publishing order.
type Published = Mutex<BTreeMap<String, Vec<(String, Vec<u8>)>>>;

/// A fake npm registry: `GET /<name>` gives the packument, `GET /<name>/-/<name>-<v>.tgz` the
/// tarball. Versions can be added while it runs. Counts the requests it served.
struct Registry {
    port: u16,
    packages: Arc<Published>,
    hits: Arc<Mutex<Vec<String>>>,
}

impl Registry {
    fn start() -> Registry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let packages: Arc<Published> = Arc::default();
        let hits: Arc<Mutex<Vec<String>>> = Arc::default();
        let (p, h) = (packages.clone(), hits.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (p, h) = (p.clone(), h.clone());
                std::thread::spawn(move || serve(stream, port, &p, &h));
            }
        });
        Registry {
            port,
            packages,
            hits,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    fn publish(&self, name: &str, version: &str, tgz: Vec<u8>) {
        self.packages
            .lock()
            .unwrap()
            .entry(name.into())
            .or_default()
            .push((version.into(), tgz));
    }

    fn hits(&self) -> Vec<String> {
        self.hits.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: std::net::TcpStream,
    port: u16,
    packages: &Published,
    hits: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            if h == "\r\n" || h == "\n" {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; len];
        let _ = reader.read_exact(&mut body);
        hits.lock().unwrap().push(path.clone());
        let (status, ctype, bytes) = respond(&path, port, packages);
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n",
            bytes.len()
        );
        if stream.write_all(head.as_bytes()).is_err() || stream.write_all(&bytes).is_err() {
            return;
        }
    }
}

fn respond(path: &str, port: u16, packages: &Published) -> (&'static str, &'static str, Vec<u8>) {
    use base64::Engine;
    use sha2::Digest;
    let path = path.split('?').next().unwrap_or(path);
    let all = packages.lock().unwrap();
    for (name, versions) in all.iter() {
        if path == format!("/{name}") {
            let mut vs = serde_json::Map::new();
            for (v, tgz) in versions {
                let integrity = format!(
                    "sha512-{}",
                    base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(tgz))
                );
                vs.insert(
                    v.clone(),
                    json!({"name": name, "version": v, "dist": {
                        "tarball": format!("http://127.0.0.1:{port}/{name}/-/{name}-{v}.tgz"),
                        "integrity": integrity}}),
                );
            }
            let latest = versions.last().map(|(v, _)| v.clone()).unwrap_or_default();
            let doc = json!({"name": name, "dist-tags": {"latest": latest}, "versions": vs});
            return ("200 OK", "application/json", doc.to_string().into_bytes());
        }
        for (v, tgz) in versions {
            if path == format!("/{name}/-/{name}-{v}.tgz") {
                return ("200 OK", "application/octet-stream", tgz.clone());
            }
        }
    }
    (
        "404 Not Found",
        "application/json",
        br#"{"error":"not found"}"#.to_vec(),
    )
}

/// Writes `files` (relative path → content) under `dir`.
fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (rel, content) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// The demo package's files at `version`.
fn demo_files(name: &str, version: &str) -> Vec<(String, String)> {
    vec![
        (
            "package.json".into(),
            json!({"name": name, "version": version, "keywords": ["pi-package"],
                   "peerDependencies": {"@earendil-works/pi-coding-agent": "*"}})
            .to_string(),
        ),
        ("extensions/demo.js".into(), DEMO_EXT.into()),
        (
            "skills/hello/SKILL.md".into(),
            "---\nname: hello\ndescription: Say hello\n---\nHello skill body\n".into(),
        ),
        (
            "prompts/review.md".into(),
            "---\ndescription: Review code\n---\nReview $@\n".into(),
        ),
    ]
}

/// An npm tarball (`package/…`) of the demo package, made with the system `tar`.
fn demo_tgz(root: &RunRoot, name: &str, version: &str) -> Vec<u8> {
    let stage = root.tmp.join(format!("stage-{name}-{version}"));
    let files = demo_files(name, version);
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_tree(&stage.join("package"), &refs);
    let out = Command::new("tar")
        .args(["czf", "-", "-C"])
        .arg(&stage)
        .arg("package")
        .output()
        .expect("system tar");
    assert!(out.status.success(), "tar failed");
    out.stdout
}

/// The environment npm and git need in these tests: the fake registry, a private npm cache,
/// a git config whose only rule maps `https://example.test/` to `repos/` of the run root.
fn net_env(root: &RunRoot, reg: &Registry) -> Vec<(String, String)> {
    let gitconfig = root.path().join("gitconfig");
    let repos = root.path().join("repos");
    std::fs::write(
        &gitconfig,
        format!(
            "[url \"file://{}/\"]\n\tinsteadOf = https://example.test/\n[user]\n\temail = t@example.test\n\tname = t\n[advice]\n\tdetachedHead = false\n",
            repos.display()
        ),
    )
    .unwrap();
    vec![
        ("npm_config_registry".into(), reg.url()),
        (
            "npm_config_cache".into(),
            root.tmp.join("npm-cache").display().to_string(),
        ),
        ("npm_config_update_notifier".into(), "false".into()),
        ("GIT_CONFIG_GLOBAL".into(), gitconfig.display().to_string()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        // Start-up installs and `pi update` are skipped offline (the harness sets it).
        ("PI_OFFLINE".into(), "0".into()),
    ]
}

/// Runs `pi <args>` (a subcommand) in the run root's cwd.
fn pi(root: &RunRoot, env: &[(String, String)], args: &[&str]) -> Output {
    pi_in(root, &root.cwd, env, args)
}

fn pi_in(root: &RunRoot, cwd: &Path, env: &[(String, String)], args: &[&str]) -> Output {
    let bin = std::env::var_os("PI_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_pi")));
    Command::new(bin)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(root.env())
        .envs(env.iter().map(|(a, b)| (a.as_str(), b.as_str())))
        .stdin(Stdio::null())
        .output()
        .expect("run pi")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn spawn(root: &RunRoot, env: &[(String, String)], args: &[&str]) -> RpcAgent {
    let extra: Vec<(&str, &str)> = env.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    root.spawn_with_env(false, args, &extra)
}

fn commands(agent: &mut RpcAgent) -> Vec<Value> {
    let r = agent.request(json!({"id": "c", "type": "get_commands"}));
    r["data"]["commands"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn command<'a>(cmds: &'a [Value], name: &str) -> Option<&'a Value> {
    cmds.iter().find(|c| c["name"] == name)
}

fn settings(root: &RunRoot) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.agent_dir.join("settings.json")).unwrap())
        .unwrap()
}

fn installed_version(dir: &Path) -> String {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).unwrap()).unwrap();
    v["version"].as_str().unwrap_or_default().to_string()
}

#[test]
fn npm_install_writes_upstreams_files_and_the_run_loads_the_package() {
    let (fake, root) = setup(Script::new([Turn::text("hi")]), DEFAULT_MODEL);
    let reg = Registry::start();
    reg.publish("pi-demo", "1.0.0", demo_tgz(&root, "pi-demo", "1.0.0"));
    let env = net_env(&root, &reg);

    let out = pi(&root, &env, &["install", "npm:pi-demo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let so = stdout(&out);
    assert!(so.starts_with("Installing npm:pi-demo...\n"), "{so}");
    assert!(so.ends_with("Installed npm:pi-demo\n"), "{so}");
    let s = settings(&root);
    assert_eq!(s["packages"], json!(["npm:pi-demo"]));
    assert_eq!(s["defaultModel"], "fake-gpt-mini", "other settings kept");
    let npm = root.agent_dir.join("npm");
    assert_eq!(
        std::fs::read_to_string(npm.join(".gitignore")).unwrap(),
        "*\n!.gitignore\n"
    );
    let pj: Value =
        serde_json::from_str(&std::fs::read_to_string(npm.join("package.json")).unwrap()).unwrap();
    assert_eq!(pj["name"], "pi-extensions");
    assert_eq!(pj["private"], true);
    assert_eq!(
        pj["dependencies"]["pi-demo"], "^1.0.0",
        "npm saved it: {pj}"
    );
    let pkg = npm.join("node_modules").join("pi-demo");
    assert!(pkg.join("extensions/demo.js").is_file());

    let mut agent = spawn(&root, &env, &[]);
    let cmds = commands(&mut agent);
    let info = json!({"source": "npm:pi-demo", "scope": "user", "origin": "package",
                      "baseDir": pkg.display().to_string()});
    let demo = command(&cmds, "demo-cmd").unwrap_or_else(|| panic!("{cmds:?}"));
    assert_eq!(demo["source"], "extension");
    let mut want = info.clone();
    want["path"] = json!(pkg.join("extensions/demo.js").display().to_string());
    assert_eq!(demo["sourceInfo"], want);
    let skill = command(&cmds, "skill:hello").unwrap_or_else(|| panic!("{cmds:?}"));
    let mut want = info.clone();
    want["path"] = json!(pkg.join("skills/hello/SKILL.md").display().to_string());
    assert_eq!(skill["sourceInfo"], want);
    let review = command(&cmds, "review").unwrap_or_else(|| panic!("{cmds:?}"));
    assert_eq!(review["source"], "prompt");
    assert_eq!(review["description"], "Review code");
    let mut want = info;
    want["path"] = json!(pkg.join("prompts/review.md").display().to_string());
    assert_eq!(review["sourceInfo"], want);

    agent.send(json!({"id": "p", "type": "prompt", "message": "hello"}));
    agent.wait_event("agent_end");
    let body = fake.llm_requests()[0].body_text();
    assert!(body.contains("\"demo_tool\""), "tool offered: {body}");
    assert!(
        body.contains("Say hello"),
        "skill in the system prompt: {body}"
    );
    assert!(body.contains("skills/hello/SKILL.md"), "{body}");
}

#[test]
fn list_update_and_remove_by_package_name_as_upstream() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let reg = Registry::start();
    reg.publish("pi-demo", "1.0.0", demo_tgz(&root, "pi-demo", "1.0.0"));
    let env = net_env(&root, &reg);
    assert_eq!(
        pi(&root, &env, &["install", "npm:pi-demo"]).status.code(),
        Some(0)
    );
    let pkg = root.agent_dir.join("npm/node_modules/pi-demo");

    let out = pi(&root, &env, &["list"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out),
        format!("User packages:\n  npm:pi-demo\n    {}\n", pkg.display())
    );

    reg.publish("pi-demo", "1.1.0", demo_tgz(&root, "pi-demo", "1.1.0"));
    let out = pi(&root, &env, &["update", "--extensions"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let so = stdout(&out);
    assert!(so.starts_with("Updating npm:pi-demo...\n"), "{so}");
    assert!(
        so.ends_with("Updated 1 package:\n  npm:pi-demo 1.0.0 -> 1.1.0\n"),
        "{so}"
    );
    assert_eq!(installed_version(&pkg), "1.1.0");
    let out = pi(&root, &env, &["update", "--extensions"]);
    assert_eq!(stdout(&out), "Packages are already up to date\n");
    let out = pi(&root, &env, &["update", "npm:pi-demo"]);
    assert_eq!(stdout(&out), "npm:pi-demo is already up to date\n");
    let out = pi(&root, &env, &["update", "pi-demo"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Error: No matching package found for pi-demo. Did you mean npm:pi-demo?\n"
    );

    // `remove` matches by package name: a pinned spelling removes the unpinned entry.
    let out = pi(&root, &env, &["remove", "npm:pi-demo@1.1.0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let so = stdout(&out);
    assert!(so.starts_with("Removing npm:pi-demo@1.1.0...\n"), "{so}");
    assert!(so.ends_with("Removed npm:pi-demo@1.1.0\n"), "{so}");
    assert!(!pkg.exists(), "npm uninstall removed the files");
    assert_eq!(settings(&root)["packages"], json!([]));
    let out = pi(&root, &env, &["list"]);
    assert_eq!(stdout(&out), "No packages installed.\n");
    let out = pi(&root, &env, &["remove", "npm:pi-demo"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "No matching package found for npm:pi-demo\n");
}

#[test]
fn git_install_checks_out_under_the_agent_git_folder_and_remove_deletes_it() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let reg = Registry::start();
    let env = net_env(&root, &reg);
    let repo = root.path().join("repos/owner/gitdemo");
    let files = demo_files("pi-gitdemo", "1.0.0");
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    write_tree(&repo, &refs);
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_CONFIG_GLOBAL", root.path().join("gitconfig"))
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git")
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "one"]);
    git(&["tag", "v1"]);

    let src = "git:example.test/owner/gitdemo@v1";
    let out = pi(&root, &env, &["install", src]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).ends_with(&format!("Installed {src}\n")));
    let checkout = root.agent_dir.join("git/example.test/owner/gitdemo");
    assert!(checkout.join(".git").is_dir());
    assert!(checkout.join("extensions/demo.js").is_file());
    assert_eq!(
        std::fs::read_to_string(root.agent_dir.join("git/.gitignore")).unwrap(),
        "*\n!.gitignore\n"
    );
    assert_eq!(settings(&root)["packages"], json!([src]));
    let out = pi(&root, &env, &["list"]);
    assert_eq!(
        stdout(&out),
        format!("User packages:\n  {src}\n    {}\n", checkout.display())
    );

    let mut agent = spawn(&root, &env, &[]);
    let cmds = commands(&mut agent);
    let demo = command(&cmds, "demo-cmd").unwrap_or_else(|| panic!("{cmds:?}"));
    assert_eq!(demo["sourceInfo"]["source"], src);
    assert_eq!(
        demo["sourceInfo"]["baseDir"],
        checkout.display().to_string()
    );
    drop(agent);

    // Remove by repository (the ref is not part of the identity).
    let out = pi(&root, &env, &["remove", "git:example.test/owner/gitdemo"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!checkout.exists());
    assert!(
        !root.agent_dir.join("git/example.test").exists(),
        "empty parents pruned"
    );
    assert_eq!(settings(&root)["packages"], json!([]));

    // Unpinned, `pi update` resets the checkout to the remote branch's new commit.
    let src = "git:example.test/owner/gitdemo";
    assert_eq!(pi(&root, &env, &["install", src]).status.code(), Some(0));
    let head = || {
        let o = Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&repo)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim()[..7].to_string()
    };
    let before = head();
    write_tree(&repo, &[("NEW.md", "new\n")]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "two"]);
    let out = pi(&root, &env, &["update", "--extensions"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out)
            .lines()
            .filter(|l| l.starts_with("Updat") || l.starts_with("  git:"))
            .collect::<Vec<_>>(),
        vec![
            format!("Updating {src}..."),
            "Updated 1 package:".to_string(),
            format!("  {src} {before} -> {}", head()),
        ]
    );
    assert!(checkout.join("NEW.md").is_file());
}

#[test]
fn manifest_globs_and_settings_filters_narrow_a_local_package() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let pkg = root.path().join("pkgs/tools");
    let ext = |name: &str| {
        format!(
            "export default function (pi) {{ pi.registerCommand(\"{name}\", {{ description: \"{name}\", handler: async () => {{}} }}); }}\n"
        )
    };
    let (main_ext, legacy_ext, extra_ext) = (ext("main-cmd"), ext("legacy-cmd"), ext("extra-cmd"));
    write_tree(
        &pkg,
        &[
            (
                "package.json",
                r#"{"name": "tools", "pi": {
                    "extensions": ["./src/*.js", "!./src/legacy.js"],
                    "skills": ["./res/skills"],
                    "prompts": ["./res/prompts/*.md"]}}"#,
            ),
            ("src/main.js", &main_ext),
            ("src/legacy.js", &legacy_ext),
            ("src/extra.js", &extra_ext),
            // Not declared by the manifest: never loaded.
            ("prompts/hidden.md", "hidden\n"),
            (
                "res/skills/s1/SKILL.md",
                "---\nname: s1\ndescription: one\n---\nx\n",
            ),
            ("res/prompts/review.md", "review\n"),
            ("res/prompts/other.md", "other\n"),
        ],
    );
    root.merge_settings(json!({"packages": [{
        "source": "../pkgs/tools",
        "extensions": ["!src/extra.js"],
        "skills": [],
        "prompts": ["res/prompts/review.md"]
    }]}));
    let mut agent = root.spawn();
    let cmds = commands(&mut agent);
    let names: Vec<&str> = cmds.iter().filter_map(|c| c["name"].as_str()).collect();
    assert!(names.contains(&"main-cmd"), "{names:?}");
    assert!(
        !names.contains(&"legacy-cmd"),
        "manifest exclusion: {names:?}"
    );
    assert!(
        !names.contains(&"extra-cmd"),
        "settings exclusion: {names:?}"
    );
    assert!(
        !names.contains(&"skill:s1"),
        "skills: [] loads none: {names:?}"
    );
    assert!(names.contains(&"review"), "{names:?}");
    assert!(!names.contains(&"other"), "{names:?}");
    assert!(!names.contains(&"hidden"), "{names:?}");
    let main = command(&cmds, "main-cmd").unwrap();
    assert_eq!(
        main["sourceInfo"],
        json!({"path": pkg.join("src/main.js").display().to_string(), "source": "../pkgs/tools",
               "scope": "user", "origin": "package", "baseDir": pkg.display().to_string()})
    );
}

#[test]
fn untrusted_project_packages_are_neither_installed_nor_loaded() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let reg = Registry::start();
    reg.publish("pi-demo", "1.0.0", demo_tgz(&root, "pi-demo", "1.0.0"));
    let env = net_env(&root, &reg);
    root.write_cwd_file(
        ".pi/settings.json",
        &json!({"packages": ["npm:pi-demo"]}).to_string(),
    );
    let mut agent = spawn(&root, &env, &["--no-approve"]);
    let cmds = commands(&mut agent);
    assert!(command(&cmds, "demo-cmd").is_none(), "{cmds:?}");
    drop(agent);
    assert!(reg.hits().is_empty(), "npm was not asked: {:?}", reg.hits());
    assert!(!root.cwd.join(".pi/npm").exists());

    // Trusted, the same declaration installs into the project and loads with scope project.
    let mut agent = spawn(&root, &env, &["--approve"]);
    let cmds = commands(&mut agent);
    let demo = command(&cmds, "demo-cmd").unwrap_or_else(|| panic!("{cmds:?} {}", agent.stderr()));
    assert_eq!(demo["sourceInfo"]["scope"], "project");
    assert!(root.cwd.join(".pi/npm/node_modules/pi-demo").is_dir());
}

#[test]
fn a_missing_configured_package_is_installed_at_start_and_a_failing_one_warned_about() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let reg = Registry::start();
    reg.publish("pi-demo", "1.0.0", demo_tgz(&root, "pi-demo", "1.0.0"));
    let env = net_env(&root, &reg);
    root.merge_settings(json!({"packages": ["npm:pi-demo", "npm:nothere"]}));
    let mut agent = spawn(&root, &env, &[]);
    let cmds = commands(&mut agent);
    assert!(command(&cmds, "demo-cmd").is_some(), "{cmds:?}");
    assert!(root.agent_dir.join("npm/node_modules/pi-demo").is_dir());
    let err = agent.stderr();
    assert!(
        err.contains(&format!(
            "Warning: Extension package \"npm:nothere\": failed to install (npm install nothere --prefix {} --legacy-peer-deps --no-audit --no-fund failed with code 1). Run \"pi remove npm:nothere\" to remove it from settings.json.",
            root.agent_dir.join("npm").display()
        )),
        "{err}"
    );
}

#[test]
fn extension_flag_with_an_npm_source_caches_it_for_the_run() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let reg = Registry::start();
    reg.publish("pi-demo", "1.0.0", demo_tgz(&root, "pi-demo", "1.0.0"));
    let env = net_env(&root, &reg);
    let mut agent = spawn(&root, &env, &["-e", "npm:pi-demo"]);
    let cmds = commands(&mut agent);
    let demo = command(&cmds, "demo-cmd").unwrap_or_else(|| panic!("{cmds:?} {}", agent.stderr()));
    // sha256("npm-")[..8] names the cache folder, as upstream.
    let pkg = root
        .agent_dir
        .join("tmp/extensions/npm/f35b2129/node_modules/pi-demo");
    assert_eq!(
        demo["sourceInfo"],
        json!({"path": pkg.join("extensions/demo.js").display().to_string(),
               "source": "npm:pi-demo", "scope": "temporary", "origin": "package",
               "baseDir": pkg.display().to_string()})
    );
    assert!(
        settings(&root).get("packages").is_none(),
        "not written to settings"
    );
}

/// `"autoload": false` (upstream 1.6 `docs/packages.md` "Understand scope and identity",
/// `package-manager.js` `applyPackageDeltaFilter`, `dedupePackages`): such an entry loads
/// nothing but what its patterns name; a project entry of that form over a personal entry of
/// the same package is a delta over it (its `!` turns off, its plain patterns add, each added
/// file with scope project; the rest comes from the personal entry). The expected lists were
/// recorded from upstream 1.6 on the same files (`get_commands`, offline).
#[test]
fn autoload_false_loads_only_the_named_resources_and_a_project_entry_is_a_delta() {
    let (_fake, root) = setup(Script::new([]), DEFAULT_MODEL);
    let pkg = root.agent_dir.join("npm/node_modules/pi-multi");
    let ext = |name: &str| {
        format!(
            "export default function (pi) {{ pi.registerCommand(\"{name}\", {{ description: \"{name}\", handler: async () => {{}} }}); }}\n"
        )
    };
    let (a, b, c) = (ext("a-cmd"), ext("b-cmd"), ext("c-cmd"));
    write_tree(
        &pkg,
        &[
            (
                "package.json",
                r#"{"name": "pi-multi", "version": "1.0.0", "keywords": ["pi-package"]}"#,
            ),
            ("extensions/a.js", &a),
            ("extensions/b.js", &b),
            ("extensions/c.js", &c),
            ("prompts/p1.md", "p1 body\n"),
            ("prompts/p2.md", "p2 body\n"),
        ],
    );
    write_tree(
        &root.agent_dir.join("npm"),
        &[(
            "package.json",
            r#"{"name": "pi-extensions", "private": true}"#,
        )],
    );
    // `name scope file` of each package command (extensions and prompt templates).
    let loaded = |agent: &mut RpcAgent| -> Vec<String> {
        let mut v: Vec<String> = commands(agent)
            .iter()
            .filter(|c| c["sourceInfo"]["source"] == "npm:pi-multi")
            .map(|c| {
                let path = c["sourceInfo"]["path"].as_str().unwrap_or_default();
                let file = Path::new(path)
                    .strip_prefix(&pkg)
                    .unwrap_or(Path::new(path));
                format!(
                    "{} {} {}",
                    c["name"].as_str().unwrap_or_default(),
                    c["sourceInfo"]["scope"].as_str().unwrap_or_default(),
                    file.display()
                )
            })
            .collect();
        v.sort();
        v
    };

    // A personal entry with autoload false: only what its patterns name.
    root.merge_settings(json!({"packages": [{
        "source": "npm:pi-multi", "autoload": false,
        "extensions": ["extensions/*.js", "-extensions/b.js"],
        "prompts": ["+prompts/p2.md"]
    }]}));
    let mut agent = root.spawn();
    assert_eq!(
        loaded(&mut agent),
        [
            "a-cmd user extensions/a.js",
            "c-cmd user extensions/c.js",
            "p2 user prompts/p2.md"
        ],
        "{}",
        agent.stderr()
    );
    drop(agent);

    // A personal entry with a filter, and a project delta over it.
    root.merge_settings(json!({"packages": [{
        "source": "npm:pi-multi", "extensions": ["extensions/a.js", "extensions/b.js"]
    }]}));
    root.write_cwd_file(
        ".pi/settings.json",
        &json!({"packages": [{
            "source": "npm:pi-multi", "autoload": false,
            "extensions": ["!extensions/b.js", "extensions/c.js"],
            "prompts": ["prompts/p1.md"]
        }]})
        .to_string(),
    );
    let mut agent = spawn(&root, &[], &["--approve"]);
    assert_eq!(
        loaded(&mut agent),
        [
            "a-cmd user extensions/a.js",
            "c-cmd project extensions/c.js",
            "p1 project prompts/p1.md",
            "p2 user prompts/p2.md"
        ],
        "{}",
        agent.stderr()
    );
    drop(agent);

    // Untrusted, the project entry is not read: the personal entry alone.
    let mut agent = spawn(&root, &[], &["--no-approve"]);
    assert_eq!(
        loaded(&mut agent),
        [
            "a-cmd user extensions/a.js",
            "b-cmd user extensions/b.js",
            "p1 user prompts/p1.md",
            "p2 user prompts/p2.md"
        ],
        "{}",
        agent.stderr()
    );
}
