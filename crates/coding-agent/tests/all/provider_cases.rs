//! Shared runner of the provider conversations in `fixtures/providers/cases.json` (issue 14):
//! writes a case's `models.json`, `settings.json`, files and service-account key, spawns `pi
//! --mode rpc` with its environment against a fake speaking its wire, plays its steps and
//! returns what the fake saw and the final messages, as `fixtures/providers/record.py` does
//! for upstream. Used by `rpc_providers_google_mistral` and `rpc_bedrock`.

use crate::common::*;
use pi_fakellm::{FakeLlm, Script};
use serde_json::{json, Value};
use std::path::PathBuf;

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers")
}

pub fn read_json(rel: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join(rel)).expect("fixture");
    serde_json::from_str(&text).expect("fixture JSON")
}

pub fn subst(v: &Value, port: u16, root: &str) -> Value {
    let text = v
        .to_string()
        .replace("{port}", &port.to_string())
        .replace("{root}", root);
    serde_json::from_str(&text).expect("substituted JSON")
}

/// What one case produced: the requests the fake saw and the final `get_messages` list.
pub struct Played {
    /// Each request the fake saw: method, path (port masked), api, the named headers, body.
    pub requests: Vec<Value>,
    /// `get_messages` after the last step.
    pub messages: Vec<Value>,
    /// Every event of the run.
    pub events: Vec<Value>,
}

/// Plays `cases.json[name]` through our `pi`, as record.py plays it through upstream, and
/// keeps the request headers named in `keep`.
pub fn play(name: &str, keep: &[&str]) -> Played {
    let case = read_json("cases.json")[name].clone();
    let script = Script::from_value(case["llm"].clone()).expect("script");
    let fake = FakeLlm::spawn(script).expect("fake");
    let port = fake.port();
    let root = RunRoot::new(port);
    let root_dir = root.path().to_string_lossy().into_owned();
    root.write_agent_file("models.json", &subst(&case["models"], port, &root_dir));
    root.write_agent_file("settings.json", &case["settings"]);
    if let Some(files) = case["files"].as_object() {
        for (rel, content) in files {
            root.write_cwd_file(rel, content.as_str().unwrap_or(""));
        }
    }
    if case["service_account"] == true {
        let sa = subst(&read_json("service_account.template.json"), port, &root_dir);
        std::fs::write(root.path().join("sa.json"), sa.to_string()).unwrap();
    }
    let env: Vec<(String, String)> = subst(&case["env"], port, &root_dir)
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut agent = root.spawn_with_env(false, &[], &env_refs);
    for (i, step) in case["steps"].as_array().unwrap().iter().enumerate() {
        let mut cmd = subst(step, port, &root_dir);
        cmd["id"] = json!(format!("s{i}"));
        let from = agent.len();
        let r = agent.request(cmd.clone());
        assert_eq!(r["success"], true, "{cmd} → {r}\n{}", agent.stderr());
        if cmd["type"] == "prompt" {
            agent.wait_from(from, LIVENESS, |v| kind(v) == "agent_settled");
        }
    }
    let r = agent.request(json!({"id": "final", "type": "get_messages"}));
    let messages = r["data"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let requests = fake
        .requests()
        .into_iter()
        .map(|r| {
            let mut headers = serde_json::Map::new();
            for h in keep {
                if let Some(v) = r.header(h) {
                    headers.insert((*h).into(), json!(v));
                }
            }
            json!({"method": r.method, "path": r.path.replace(&port.to_string(), "{port}"),
                   "api": r.api, "headers": headers, "body": r.body})
        })
        .collect();
    let events = agent.events();
    Played {
        requests,
        messages,
        events,
    }
}
