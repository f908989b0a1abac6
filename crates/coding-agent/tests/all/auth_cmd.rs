//! `pi auth check|print-api-key|print-bearer-token|logout` against upstream 1.6's answers
//! (exit code, stdout, stderr) for the same environment and `auth.json`
//! (`tests/data/upstream_auth/cases.json`, recorded by `record.py` there), plus `login`
//! storing a key with mode 0600.

use crate::common::RunRoot;
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

fn bin() -> std::path::PathBuf {
    std::env::var_os("PI_TEST_BIN")
        .map(Into::into)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_pi").into())
}

fn root_with(auth: &Value) -> RunRoot {
    let root = RunRoot::new(1);
    std::fs::remove_file(root.agent_dir.join("models.json")).expect("rm models.json");
    root.write_agent_file("settings.json", &json!({}));
    if !auth.is_null() {
        root.write_agent_file("auth.json", auth);
    }
    root
}

/// `pi <args>` started in the run root with `env` added, `stdin` written and closed.
fn spawn(root: &RunRoot, env: &Value, args: &[&str], stdin: &str) -> std::process::Child {
    use std::io::Write;
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(&root.cwd)
        .env_clear()
        .envs(root.env())
        .envs(
            env.as_object()
                .expect("env")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("str").to_string())),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pi");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child
}

fn run(root: &RunRoot, env: &Value, args: &[&str], stdin: &str) -> (i32, String, String) {
    let out = spawn(root, env, args, stdin)
        .wait_with_output()
        .expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn auth_commands_answer_as_upstream() {
    let path = format!(
        "{}/tests/data/upstream_auth/cases.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(path).expect("cases")).expect("json");
    let mut failures = Vec::new();
    for case in &cases {
        let args: Vec<&str> = case["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("arg"))
            .collect();
        let root = root_with(&case["auth"]);
        let (rc, stdout, stderr) = run(&root, &case["env"], &args, "");
        let want = (
            case["rc"].as_i64().expect("rc") as i32,
            case["stdout"].as_str().expect("stdout").to_string(),
            case["stderr"].as_str().expect("stderr").to_string(),
        );
        if (rc, &stdout, &stderr) != (want.0, &want.1, &want.2) {
            failures.push(format!(
                "{args:?} env={} auth={}\n  ours:     {rc} {stdout:?} {stderr:?}\n  upstream: {} {:?} {:?}",
                case["env"], case["auth"], want.0, want.1, want.2
            ));
        }
        if args.get(1) == Some(&"logout") && rc == 0 {
            let left =
                std::fs::read_to_string(root.agent_dir.join("auth.json")).unwrap_or_default();
            assert!(!left.contains("sk-stored"), "logout left the key: {left}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn login_stores_the_key_mode_0600_and_keeps_other_entries() {
    let root = root_with(&json!({"anthropic": {"type": "api_key", "key": "sk-ant-old"}}));
    let (rc, stdout, _) = run(
        &root,
        &json!({}),
        &["auth", "login", "openai", "--api-key"],
        "sk-new\n",
    );
    assert_eq!(rc, 0);
    let file = root.agent_dir.join("auth.json");
    assert_eq!(
        stdout,
        format!(
            "Saved API key for OpenAI. Credentials saved to {}\n",
            file.display()
        )
    );
    let mode = std::fs::metadata(&file)
        .expect("auth.json")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    assert_eq!(v["openai"], json!({"type": "api_key", "key": "sk-new"}));
    assert_eq!(v["anthropic"]["key"], "sk-ant-old");
    let (rc, stdout, _) = run(
        &root,
        &json!({}),
        &["auth", "print-api-key", "--provider", "openai"],
        "",
    );
    assert_eq!((rc, stdout.as_str()), (0, "sk-new\n"));
    let (rc, _, stderr) = run(&root, &json!({}), &["auth", "login", "nope"], "k\n");
    assert_eq!(rc, 1);
    assert!(stderr.starts_with("Unknown provider \"nope\"."), "{stderr}");
}

/// `auth.json` is locked as upstream pi locks it (proper-lockfile: the directory
/// `auth.json.lock`), so the two exclude each other: while another process holds a fresh
/// lock, `pi auth login` waits and writes nothing; once it is released the key is saved and no
/// lock is left behind. A plain file of that name (left by older versions of ours, which made
/// upstream report `invalid_state` for every credential) is cleared.
#[test]
fn auth_json_is_locked_as_upstream_locks_it() {
    let root = root_with(&json!({"anthropic": {"type": "api_key", "key": "sk-ant-old"}}));
    let file = root.agent_dir.join("auth.json");
    let lock = root.agent_dir.join("auth.json.lock");
    std::fs::create_dir(&lock).expect("lock dir");
    let mut child = spawn(
        &root,
        &json!({}),
        &["auth", "login", "openai", "--api-key"],
        "sk-new\n",
    );
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        !std::fs::read_to_string(&file)
            .expect("auth.json")
            .contains("sk-new"),
        "written while another process held the lock"
    );
    assert_eq!(child.try_wait().expect("try_wait"), None, "pi did not wait");
    std::fs::remove_dir(&lock).expect("release");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    assert_eq!(v["openai"]["key"], "sk-new");
    assert!(!lock.exists(), "lock left behind");

    std::fs::write(&lock, "").expect("leftover lock file");
    let (rc, _, stderr) = run(&root, &json!({}), &["auth", "logout", "openai"], "");
    assert_eq!(rc, 0, "{stderr}");
    assert!(!lock.exists(), "leftover lock file kept");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    assert!(v.get("openai").is_none(), "{v}");
}

/// A symlinked `auth.json` (dotfiles setups) is written through, as upstream writes it: `login`
/// and `logout` change the file the link points to, and the link stays a link. Before, the link
/// was replaced by a new file, so a logout left the key in the real file.
#[test]
fn a_symlinked_auth_json_is_written_through() {
    let root = root_with(&Value::Null);
    let dot = root.cwd.join("dotfiles");
    std::fs::create_dir_all(&dot).expect("dotfiles");
    let real = dot.join("auth.json");
    std::fs::write(&real, r#"{"openai": {"type": "api_key", "key": "sk-old"}}"#).expect("write");
    let link = root.agent_dir.join("auth.json");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&real, &link).expect("symlink");
    let (rc, _, stderr) = run(&root, &json!({}), &["auth", "logout", "openai"], "");
    assert_eq!(rc, 0, "{stderr}");
    assert!(std::fs::symlink_metadata(&link)
        .expect("link")
        .file_type()
        .is_symlink());
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&real).expect("real")).expect("json");
    assert!(
        v.get("openai").is_none(),
        "logout left the key in the real file: {v}"
    );
    let (rc, _, stderr) = run(
        &root,
        &json!({}),
        &["auth", "login", "anthropic", "--api-key"],
        "sk-ant-new\n",
    );
    assert_eq!(rc, 0, "{stderr}");
    assert!(std::fs::symlink_metadata(&link)
        .expect("link")
        .file_type()
        .is_symlink());
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&real).expect("real")).expect("json");
    assert_eq!(v["anthropic"]["key"], "sk-ant-new");
    assert!(!root.agent_dir.join("auth.json.lock").exists());
    assert!(!dot.join("auth.json.lock").exists());
}
