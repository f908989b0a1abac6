#!/usr/bin/env python3
"""ACP startup benchmark: time to the `initialize` answer and memory, `pi --mode acp` against
the npm `pi-acp` adapter (issue 25).

For each agent, N times (the agents' runs interleaved, so drift on a shared machine hits both
alike): spawn it in a temp cwd with a temp PI_CODING_AGENT_DIR, write one ACP `initialize`
(protocol v1), measure the wall time (time.perf_counter) from just before the spawn to the
answer line, stay idle --idle seconds, read VmRSS of the spawned process from /proc, close stdin
and wait for the exit. Medians are printed.

The adapter starts `pi --mode rpc` (upstream pi, Node >= 22) only for a session; this measures
its process alone, so its figure is a lower bound of what an editor pays for it.

Usage:
  python3 bench/acp_initialize.py --ours target/release/pi \
      [--adapter "node /path/to/node_modules/pi-acp/dist/index.js"] [--runs 7] [--idle 0.3]

Python 3 standard library only; Linux only (/proc).
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time

INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'


def once(cmd, idle):
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
        line = p.stdout.readline()
        ms = (time.perf_counter() - t0) * 1000
        time.sleep(idle)
        rss = 0
        with open(f"/proc/{p.pid}/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    rss = int(row.split()[1]) / 1024
        p.stdin.close()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
        if json.loads(line).get("result", {}).get("protocolVersion") != 1:
            raise SystemExit(f"{cmd[0]}: no initialize answer: {line!r}")
        return ms, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--idle", type=float, default=0.3)
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


if __name__ == "__main__":
    main()
