#!/usr/bin/env python3
"""RPC `bash` of a large, fast output: is every line delivered, and at what memory and speed?

For each of N runs (issue 7):

  1. create a temp run root (cwd/, home/, tmp/, agent/ with a models.json holding one
     openai-completions provider at http://127.0.0.1:9/v1 and a settings.json naming it);
  2. spawn `<agent> --mode rpc --no-session` in cwd/ with a clean environment and write
     {"id":"b","type":"bash","command":"seq 1 N"};
  3. read stdout as fast as possible: `bash_execution_update` lines are counted (and, with
     --check-deltas, decoded and hashed), the `response` line is decoded;
  4. time from writing the command to reading its response (time.perf_counter);
  5. read VmHWM (peak resident memory) from /proc/<pid>/status of `pi` before closing stdin;
  6. check the `fullOutputPath` file: its size and SHA-256 must equal those of `seq 1 N`
     (computed once), and no delta may come after the response.

The reference is `seq 1 N > file` run directly by /bin/sh into the same tmp/ directory, timed
the same way (best of the runs). Time per MB is wall time / (output bytes / 10^6).

Usage:
  cargo build --release -p pi-coding-agent --no-default-features
  python3 bench/rpc_bash_output.py --agent target/release/pi [--lines 50000000] [--runs 5]
      [--check-deltas] [--json out.json]

Python 3 standard library only; Linux only (/proc).
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def seq_reference(lines):
    """(bytes, sha256 hex) of `seq 1 lines`, streamed."""
    h = hashlib.sha256()
    size = 0
    with subprocess.Popen(["seq", "1", str(lines)], stdout=subprocess.PIPE) as p:
        while True:
            chunk = p.stdout.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def file_digest(path):
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def make_root():
    root = tempfile.mkdtemp(prefix="pi-bench-bash-")
    for d in ("cwd", "home", "tmp", "agent"):
        os.makedirs(os.path.join(root, d))
    models = {"providers": {"bench": {
        "api": "openai-completions", "apiKey": "bench-key", "baseUrl": "http://127.0.0.1:9/v1",
        "models": [{"id": "bench-model", "name": "Bench"}]}}}
    with open(os.path.join(root, "agent", "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(root, "agent", "settings.json"), "w") as f:
        json.dump({"defaultProvider": "bench", "defaultModel": "bench-model"}, f)
    return root


def env_for(root):
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.path.join(root, "home"),
        "TMPDIR": os.path.join(root, "tmp"),
        "PI_CODING_AGENT_DIR": os.path.join(root, "agent"),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "LANG": "C.UTF-8",
    }


def vm_hwm_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def one_run(agent, lines, ref, check_deltas):
    root = make_root()
    try:
        proc = subprocess.Popen(
            [agent, "--mode", "rpc", "--no-session"], cwd=os.path.join(root, "cwd"),
            env=env_for(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, bufsize=1 << 20)
        cmd = {"id": "b", "type": "bash", "command": f"seq 1 {lines}"}
        started = time.perf_counter()
        proc.stdin.write((json.dumps(cmd) + "\n").encode())
        proc.stdin.flush()
        deltas = 0
        delta_hash = hashlib.sha256() if check_deltas else None
        delta_bytes = 0
        response = None
        elapsed = None
        late_delta = False
        for raw in proc.stdout:
            if b'"bash_execution_update"' in raw[:64]:
                deltas += 1
                if response is not None:
                    late_delta = True
                if delta_hash is not None:
                    d = json.loads(raw)["delta"].encode()
                    delta_hash.update(d)
                    delta_bytes += len(d)
                continue
            v = json.loads(raw)
            if v.get("type") == "response" and v.get("id") == "b":
                response = v
                elapsed = time.perf_counter() - started
                break
        if elapsed is None:
            elapsed = time.perf_counter() - started
        hwm = vm_hwm_kb(proc.pid)
        proc.stdin.close()
        rest = proc.stdout.read()
        if b'"bash_execution_update"' in rest:
            late_delta = True
        proc.wait(timeout=30)
        data = (response or {}).get("data") or {}
        path = data.get("fullOutputPath")
        size, digest = file_digest(path) if path and os.path.exists(path) else (0, "")
        complete = (size, digest) == ref
        deltas_ok = None
        if delta_hash is not None:
            deltas_ok = (delta_bytes, delta_hash.hexdigest()) == ref
        if path and os.path.exists(path):
            os.remove(path)
        return {
            "seconds": elapsed, "peak_rss_mb": hwm / 1024, "deltas": deltas,
            "file_bytes": size, "complete": complete, "deltas_complete": deltas_ok,
            "late_delta": late_delta, "exit_code": data.get("exitCode"),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def direct_run(lines):
    root = tempfile.mkdtemp(prefix="pi-bench-seq-")
    try:
        out = os.path.join(root, "out")
        started = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", f"seq 1 {lines} > '{out}'"], check=True)
        return time.perf_counter() - started
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agent", required=True)
    ap.add_argument("--lines", type=int, default=50_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--check-deltas", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    agent = os.path.abspath(args.agent)
    ref = seq_reference(args.lines)
    mb = ref[0] / 1e6
    print(f"seq 1 {args.lines}: {mb:.1f} MB")
    runs = []
    direct = []
    for i in range(args.runs):
        r = one_run(agent, args.lines, ref, args.check_deltas)
        d = direct_run(args.lines)
        runs.append(r)
        direct.append(d)
        print(f"run {i + 1}: {r['seconds']:.2f} s ({1000 * r['seconds'] / mb:.2f} ms/MB), "
              f"peak RSS {r['peak_rss_mb']:.1f} MB, {r['deltas']} deltas, file "
              f"{r['file_bytes']} bytes, complete={r['complete']}"
              + (f", deltas complete={r['deltas_complete']}" if args.check_deltas else "")
              + f", delta after response={r['late_delta']}; direct seq > file {d:.2f} s")
    complete = sum(1 for r in runs if r["complete"] and not r["late_delta"]
                   and r["deltas_complete"] is not False)
    best = min(r["seconds"] for r in runs)
    best_direct = min(direct)
    peak = max(r["peak_rss_mb"] for r in runs)
    print(f"complete: {complete}/{len(runs)}; peak RSS max {peak:.1f} MB; best {best:.2f} s = "
          f"{1000 * best / mb:.2f} ms/MB vs direct {best_direct:.2f} s = "
          f"{1000 * best_direct / mb:.2f} ms/MB ({best / best_direct:.1f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"mb": mb, "runs": runs, "direct": direct}, f, indent=1)
    ok = complete == len(runs) and peak < 64
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
