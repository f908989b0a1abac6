#!/usr/bin/env python3
"""Extension host costs (issue 12): start-up with one small extension, and the `tool_call` hook
round trip.

  1. start-up: spawn `<agent> --mode rpc --no-session` (clean env, temp run root, no model
     reachable) and time spawn → the first `get_state` response, N runs without an extension
     and N runs with `-e small.js` (one `tool_call` handler); medians and the difference. Also
     checks that no `node` process is a child of `pi` when no extension is configured.
  2. hook round trip: the scripted fake LLM (shared/conformance/fakellm.py) answers one turn
     with CALLS `read` tool calls; the extension's `tool_call` handler returns undefined; pi
     logs each round trip (PI_LOG=pi_coding_agent::extensions=debug, `us=`), from sending the
     request to the host to decoding its reply. Median and p90 in microseconds.

Usage:
  cargo build --release -p pi-coding-agent --no-default-features
  python3 bench/extension_hooks.py --agent target/release/pi [--runs 10] [--calls 1000]

Python 3 standard library only; Linux only.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "..", "..", "shared", "conformance", "fakellm.py")
EXT = 'export default function (pi) { pi.on("tool_call", () => undefined); }\n'


def root(port):
    d = tempfile.mkdtemp(prefix="pi-bench-ext-")
    for sub in ("cwd", "home", "tmp", "agent"):
        os.makedirs(os.path.join(d, sub))
    models = {"providers": {"fake": {"api": "openai-completions", "apiKey": "k",
              "baseUrl": f"http://127.0.0.1:{port}/v1",
              "models": [{"id": "m", "name": "m", "contextWindow": 32000, "maxTokens": 4096,
                          "input": ["text"], "reasoning": False,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}
    with open(os.path.join(d, "agent", "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(d, "agent", "settings.json"), "w") as f:
        json.dump({"defaultProvider": "fake", "defaultModel": "m"}, f)
    with open(os.path.join(d, "cwd", "small.js"), "w") as f:
        f.write(EXT)
    with open(os.path.join(d, "cwd", "f.txt"), "w") as f:
        f.write("x\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(d, "home"),
           "TMPDIR": os.path.join(d, "tmp"), "PI_CODING_AGENT_DIR": os.path.join(d, "agent"),
           "PI_OFFLINE": "1", "LANG": "C.UTF-8"}
    return d, env


def first_state(agent, args, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.Popen([agent, "--mode", "rpc", "--no-session", *args], cwd=cwd, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(b'{"id":"s","type":"get_state"}\n')
    p.stdin.flush()
    for line in p.stdout:
        if b'"id":"s"' in line:
            break
    dt = time.perf_counter() - t0
    kids = subprocess.run(["ps", "--ppid", str(p.pid), "-o", "comm="], capture_output=True,
                          text=True).stdout.split()
    p.stdin.close()
    p.wait()
    return dt, kids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--calls", type=int, default=1000)
    a = ap.parse_args()
    agent = os.path.abspath(a.agent)

    d, env = root(9)
    cwd = os.path.join(d, "cwd")
    base, ext = [], []
    for _ in range(a.runs):
        dt, kids = first_state(agent, [], env, cwd)
        if "node" in kids:
            sys.exit("a node process was started without any extension")
        base.append(dt)
        ext.append(first_state(agent, ["-e", "small.js"], env, cwd)[0])
    mb, me = statistics.median(base), statistics.median(ext)
    print(f"first get_state: no extension {mb*1000:.1f} ms, one extension {me*1000:.1f} ms, "
          f"added {(me-mb)*1000:.1f} ms (median of {a.runs})")

    script = {"turns": [{"blocks": [{"type": "tool_call", "name": "read",
                                     "arguments": {"path": "f.txt"}} for _ in range(a.calls)]},
                        {"blocks": [{"type": "text", "text": "done"}]}]}
    sp = os.path.join(d, "script.json")
    with open(sp, "w") as f:
        json.dump(script, f)
    fake = subprocess.Popen([sys.executable, FAKE, "--script", sp, "--log", os.path.join(d, "log")],
                            stdout=subprocess.PIPE, text=True)
    port = int(fake.stdout.readline().split()[1])
    d2, env2 = root(port)
    env2["PI_LOG"] = "pi_coding_agent::extensions=debug"
    p = subprocess.Popen([agent, "--mode", "rpc", "--no-session", "-e", "small.js"],
                         cwd=os.path.join(d2, "cwd"), env=env2, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write(b'{"id":"p","type":"prompt","message":"go"}\n')
    p.stdin.flush()
    for line in p.stdout:
        if b'"agent_settled"' in line:
            break
    p.stdin.close()
    err = p.stderr.read().decode()
    p.wait()
    fake.kill()
    us = [int(m) for m in re.findall(r"tool_call hook round trip us=(\d+)", err)]
    if not us:
        sys.exit("no round trips logged:\n" + err[-2000:])
    us.sort()
    print(f"tool_call hook round trip: median {statistics.median(us):.0f} us, "
          f"p90 {us[int(len(us)*0.9)]} us over {len(us)} calls")


if __name__ == "__main__":
    main()
