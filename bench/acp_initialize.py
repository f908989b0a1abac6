#!/usr/bin/env python3
"""ACP startup benchmark: time to the `initialize` answer and memory, `pi --mode acp` against
the npm `pi-acp` adapter (issue 25).

For each agent, N times (the agents' runs interleaved, so drift on a shared machine hits both
alike): spawn it in a temp cwd with a temp PI_CODING_AGENT_DIR, write one ACP `initialize`
(protocol v1), measure the wall time (time.perf_counter) from just before the spawn to the
answer line, stay idle --idle seconds, read VmRSS of the spawned process from /proc, close stdin
and wait for the exit. Medians are printed.

The adapter starts `pi --mode rpc` (upstream pi, Node >= 22) only for a session, so
`initialize` measures its process alone. `--session` adds what an editor pays before it can send
a prompt: after the `initialize` answer, one `session/new {cwd, mcpServers: []}`, the wall time
from the spawn to its answer, and (after --idle seconds) the RSS summed over the spawned process
and all its descendants (for the adapter: its Node process and the `pi --mode rpc` it started;
set PI_ACP_PI_COMMAND to the upstream pi to run). The adapter refuses `session/new` without a
credential ("Authentication required"), so give one in the environment, e.g.
ANTHROPIC_API_KEY=sk-dummy (nothing is sent anywhere: no prompt is made).

Usage:
  python3 bench/acp_initialize.py --ours target/release/pi \
      [--adapter "node /path/to/node_modules/pi-acp/dist/index.js"] [--runs 7] [--idle 0.3] \
      [--session]

Python 3 standard library only; Linux only (/proc).
"""

import argparse
import contextlib
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'


def tree_rss_mib(root_pid):
    """VmRSS summed over `root_pid` and its descendants (MiB), from /proc."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                parent[int(d)] = int(st[st.rindex(")") + 2:].split()[1])
            except OSError:
                pass
    pids, grew = {root_pid}, True
    while grew:
        grew = False
        for pid, pp in parent.items():
            if pp in pids and pid not in pids:
                pids.add(pid)
                grew = True
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for row in f:
                    if row.startswith("VmRSS:"):
                        total += int(row.split()[1])
        except OSError:
            pass
    return total / 1024, len(pids)


def read_answer(p, want_id):
    """Reads lines until the JSON-RPC answer with id `want_id` (notifications are skipped)."""
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"EOF before the answer to request {want_id}")
        msg = json.loads(line)
        if msg.get("id") == want_id and ("result" in msg or "error" in msg):
            return msg


@contextlib.contextmanager
def spawned(cmd):
    """The agent spawned in a temp cwd with a temp PI_CODING_AGENT_DIR, `initialize` written:
    yields (process, cwd, t0 = perf_counter just before the spawn); closes stdin and waits
    for the exit (killed after 10 s) on leaving."""
    with tempfile.TemporaryDirectory(prefix="acp-bench-") as root:
        cwd, agent = os.path.join(root, "cwd"), os.path.join(root, "agent")
        os.makedirs(cwd)
        os.makedirs(agent)
        env = dict(os.environ, PI_CODING_AGENT_DIR=agent, PI_OFFLINE="1")
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        p.stdin.write(INIT)
        p.stdin.flush()
        try:
            yield p, cwd, t0
        finally:
            p.stdin.close()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def once_session(cmd, idle):
    """initialize, then session/new: (ms to the session/new answer, tree RSS MiB, processes)."""
    with spawned(cmd) as (p, cwd, t0):
        read_answer(p, 1)
        new = {"jsonrpc": "2.0", "id": 2, "method": "session/new",
               "params": {"cwd": cwd, "mcpServers": []}}
        p.stdin.write((json.dumps(new) + "\n").encode())
        p.stdin.flush()
        answer = read_answer(p, 2)
        ms = (time.perf_counter() - t0) * 1000
        if "sessionId" not in answer.get("result", {}):
            raise SystemExit(f"{cmd[0]}: session/new failed: {answer!r}")
        time.sleep(idle)
        rss, procs = tree_rss_mib(p.pid)
    return ms, rss, procs


def once(cmd, idle):
    """initialize alone: (ms to its answer, RSS MiB of the spawned process)."""
    with spawned(cmd) as (p, _cwd, t0):
        line = p.stdout.readline()
        ms = (time.perf_counter() - t0) * 1000
        time.sleep(idle)
        rss = 0
        with open(f"/proc/{p.pid}/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    rss = int(row.split()[1]) / 1024
        if json.loads(line).get("result", {}).get("protocolVersion") != 1:
            raise SystemExit(f"{cmd[0]}: no initialize answer: {line!r}")
        return ms, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--idle", type=float, default=0.3)
    ap.add_argument("--session", action="store_true",
                    help="also time initialize + session/new and sum the process tree's RSS")
    a = ap.parse_args()
    agents = [("pi --mode acp", [os.path.abspath(a.ours), "--mode", "acp"])]
    if a.adapter:
        agents.append(("pi-acp", shlex.split(a.adapter)))
    results = {name: [] for name, _ in agents}
    for _ in range(a.runs):
        for name, cmd in agents:
            results[name].append(once(cmd, a.idle))
    for name, rs in results.items():
        ms = statistics.median(r[0] for r in rs)
        mb = statistics.median(r[1] for r in rs)
        print(f"{name}: initialize answered in {ms:.1f} ms, RSS {mb:.1f} MiB (medians of {len(rs)})")
    if not a.session:
        return
    sessions = {name: [] for name, _ in agents}
    for _ in range(a.runs):
        for name, cmd in agents:
            sessions[name].append(once_session(cmd, a.idle))
    for name, rs in sessions.items():
        ms = statistics.median(r[0] for r in rs)
        mb = statistics.median(r[1] for r in rs)
        procs = max(r[2] for r in rs)
        print(f"{name}: session/new answered {ms:.1f} ms after spawn, process tree RSS "
              f"{mb:.1f} MiB in {procs} process(es) (medians of {len(rs)})")


if __name__ == "__main__":
    main()
