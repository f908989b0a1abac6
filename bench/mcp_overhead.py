#!/usr/bin/env python3
"""MCP benchmark (issue 13): startup with a 50-tool stdio server, and the cost of a direct MCP
tool call over the server's own time.

1. Startup: N times, interleaved, spawn `pi --mode rpc --no-session` in a fresh run root with
   and without an `mcp.json` naming one stdio `fake-mcp --tools 40` server (10 + 40 = 50 tools,
   `exposure: direct`), write `get_state` at once, and time spawn → its response line.
2. Call cost: one prompt whose scripted model (`fakellm`) calls `mcp__fake__echo` once per
   turn, CALLS turns; each call's time is from reading its `tool_execution_start` line to
   reading its `tool_execution_end` line (so it includes pi's event output). The server's own time is measured
   the same way without pi: a JSON-RPC client in this script sends `tools/call echo` CALLS
   times to a `fake-mcp` over stdio, one at a time, and times each round trip. Reported: the
   medians and their difference.
3. Codemode call cost: the same, but each turn calls `codemode` with a one-call script
   (`return (await tools.mcp__fake__echo({text})).content[0].text`) against a server with the
   default (codemode) exposure; the figure is the codemode call's start→end time minus the
   server's own round trip: VM start, prelude, the call and the result formatting.

Usage:
  python3 bench/mcp_overhead.py --pi target/release/pi --fake-mcp target/release/fake-mcp \
      --fakellm target/release/fakellm [--runs 15] [--calls 50]

Python 3 standard library only; Linux only.
"""

import argparse
import json
import os
import select
import statistics
import subprocess
import tempfile
import time

MODELS = {
    "providers": {
        "fake-openai": {
            "api": "openai-completions",
            "baseUrl": "http://127.0.0.1:{port}/v1",
            "apiKey": "k",
            "models": [{"id": "m", "name": "m", "reasoning": False, "input": ["text"],
                        "contextWindow": 32000, "maxTokens": 4096,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
        }
    }
}


def run_root(port, mcp):
    root = tempfile.mkdtemp(prefix="pi-mcp-bench-")
    for d in ("cwd", "home", "tmp", "agent"):
        os.makedirs(os.path.join(root, d))
    models = json.loads(json.dumps(MODELS).replace("{port}", str(port)))
    with open(os.path.join(root, "agent", "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(root, "agent", "settings.json"), "w") as f:
        json.dump({"defaultProvider": "fake-openai", "defaultModel": "m"}, f)
    if mcp is not None:
        with open(os.path.join(root, "agent", "mcp.json"), "w") as f:
            json.dump({"mcpServers": mcp}, f)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(root, "home"),
           "TMPDIR": os.path.join(root, "tmp"), "PI_CODING_AGENT_DIR": os.path.join(root, "agent"),
           "PI_OFFLINE": "1"}
    return root, env


def read_until(proc, pred, timeout=30.0):
    buf = b""
    deadline = time.time() + timeout
    lines = []
    while time.time() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.5)
        if not r:
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                v = json.loads(line)
            except ValueError:
                continue
            v["_t"] = time.perf_counter()
            lines.append(v)
            if pred(v):
                return lines
    raise RuntimeError("timed out")


def startup_once(pi, mcp):
    root, env = run_root(9, mcp)
    t0 = time.perf_counter()
    p = subprocess.Popen([pi, "--mode", "rpc", "--no-session"], cwd=os.path.join(root, "cwd"),
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(b'{"id":"s","type":"get_state"}\n')
    p.stdin.flush()
    read_until(p, lambda v: v.get("type") == "response" and v.get("id") == "s")
    dt = time.perf_counter() - t0
    p.stdin.close()
    p.wait(10)
    return dt * 1000


def server_round_trips(fake_mcp, calls):
    p = subprocess.Popen([fake_mcp], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)

    def send(v):
        p.stdin.write((json.dumps(v) + "\n").encode())
        p.stdin.flush()

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                     "clientInfo": {"name": "bench", "version": "1"}}})
    read_until(p, lambda v: v.get("id") == 0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    out = []
    for i in range(1, calls + 1):
        t0 = time.perf_counter()
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": f"call {i}"}}})
        read_until(p, lambda v, i=i: v.get("id") == i)
        out.append((time.perf_counter() - t0) * 1000)
    p.stdin.close()
    p.wait(10)
    return out


def pi_calls(pi, fake_mcp, fakellm, calls, codemode=False):
    # One call per turn, so calls do not queue behind each other on the one server.
    def block(i):
        if codemode:
            code = f"return (await tools.mcp__fake__echo({{text: 'call {i}'}})).content[0].text;"
            return {"type": "tool_call", "name": "codemode", "arguments": {"code": code}}
        return {"type": "tool_call", "name": "mcp__fake__echo", "arguments": {"text": f"call {i}"}}
    script = {"turns": [{"blocks": [block(i)]} for i in range(calls)]
              + [{"blocks": [{"type": "text", "text": "done"}]}]}
    tool = "codemode" if codemode else "mcp__fake__echo"
    exposure = "codemode" if codemode else "direct"
    tmp = tempfile.mkdtemp(prefix="pi-mcp-bench-llm-")
    sp = os.path.join(tmp, "script.json")
    with open(sp, "w") as f:
        json.dump(script, f)
    llm = subprocess.Popen([fakellm, "--script", sp], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL)
    port = int(llm.stdout.readline().split()[1])
    root, env = run_root(port, {"fake": {"command": fake_mcp, "exposure": exposure}})
    p = subprocess.Popen([pi, "--mode", "rpc", "--no-session"], cwd=os.path.join(root, "cwd"),
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(b'{"id":"p","type":"prompt","message":"go"}\n')
    p.stdin.flush()
    lines = read_until(p, lambda v: v.get("type") == "agent_settled", 60)
    starts = {v["toolCallId"]: v["_t"] for v in lines if v.get("type") == "tool_execution_start"}
    durations = [(v["_t"] - starts[v["toolCallId"]]) * 1000 for v in lines
                 if v.get("type") == "tool_execution_end"
                 and v.get("toolName") == tool and not v.get("isError")]
    p.stdin.close()
    p.wait(10)
    llm.kill()
    llm.wait()
    return durations


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pi", required=True)
    ap.add_argument("--fake-mcp", required=True)
    ap.add_argument("--fakellm", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--calls", type=int, default=50)
    a = ap.parse_args()
    mcp = {"fake": {"command": a.fake_mcp, "args": ["--tools", "40"], "exposure": "direct"}}
    without, with_ = [], []
    startup_once(a.pi, None)
    for _ in range(a.runs):
        without.append(startup_once(a.pi, None))
        with_.append(startup_once(a.pi, mcp))
    print(f"first get_state, no MCP:          median {statistics.median(without):.1f} ms "
          f"(min {min(without):.1f}, max {max(without):.1f})")
    print(f"first get_state, 50-tool server:  median {statistics.median(with_):.1f} ms "
          f"(min {min(with_):.1f}, max {max(with_):.1f})")
    ref = server_round_trips(a.fake_mcp, a.calls)
    ours = pi_calls(a.pi, a.fake_mcp, a.fakellm, a.calls)
    mr, mo = statistics.median(ref), statistics.median(ours)
    print(f"echo round trip, script client:   median {mr:.2f} ms over {len(ref)} calls")
    print(f"echo via pi (start→end events): median {mo:.2f} ms over {len(ours)} calls")
    print(f"pi overhead per call:             {mo - mr:.2f} ms")
    cm = pi_calls(a.pi, a.fake_mcp, a.fakellm, a.calls, codemode=True)
    mc = statistics.median(cm)
    print(f"codemode one-call script via pi:  median {mc:.2f} ms over {len(cm)} calls")
    print(f"pi overhead per codemode call:    {mc - mr:.2f} ms")


if __name__ == "__main__":
    main()
