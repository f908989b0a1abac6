#!/usr/bin/env python3
"""Large session files: open, switch and get_messages times and peak RSS, ours vs upstream pi.

Generates session files (upstream's v3 JSONL format) of the requested sizes in two shapes:

  linear     one long linear branch: user / assistant (text + a tool call) / tool result turns;
             the whole file is the active context.
  compacted  the same history, then a `compaction` entry that keeps only the last few turns,
             then a few turns after it: almost the whole file is old history behind the
             compaction.

For each file and agent, three processes (spawned directly, clean environment, a run root with a
models.json/settings.json naming a model at http://127.0.0.1:9/v1 that is never called):

  open      `<agent> --mode rpc --session FILE`, `get_state` written at once: wall time from
            spawn to the response line, and the CPU time (user + system, from /proc/PID/stat)
            the process had used by then (load on the machine inflates the first, not the
            second); then exit. Peak RSS = VmHWM of the process.
  messages  the same, then `get_messages`: time from sending it to the end of the response line
            (read and discarded in chunks); peak RSS of that process.
  switch    `<agent> --mode rpc --no-session`, first `get_state` (startup), then
            `switch_session FILE`: time from sending to its response.

VmHWM is read from /proc/<pid>/status right before stdin is closed (the process has done all
its work then). Each response is checked for success. A process that takes longer than
--timeout seconds is killed and reported as "timeout".

Usage:
  python3 bench/session_scale.py --ours target/release/pi \
      [--upstream "NODE CLI_JS"] [--sizes 100M,1G] [--shapes linear,compacted] \
      [--upstream-max-size 1G] [--dir /tmp] [--timeout 300] [--json out.json]

Generated files are deleted after each size (they are large); --keep keeps them.
Python 3 standard library only; Linux only (/proc).
"""

import argparse
import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

PROVIDER = "bench"
MODEL = "bench-model"


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def human(n):
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m:
            return f"{n / m:.0f}{unit}" if n % m == 0 else f"{n / m:.1f}{unit}"
    return str(n)


class Gen:
    """Writes entries with sequential 8-hex ids, each the child of the previous one."""

    def __init__(self, f, cwd):
        self.f = f
        self.n = 0
        self.parent = None
        self.bytes = 0
        self.ts_ms = 1_790_000_000_000
        header = {"type": "session", "version": 3, "id": "01a23300-0000-7000-8000-000000000001",
                  "timestamp": "2026-10-01T00:00:00.000Z", "cwd": cwd}
        self.write(header)

    def write(self, obj):
        line = json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"
        self.f.write(line)
        self.bytes += len(line.encode())

    def entry(self, ty, **fields):
        self.n += 1
        eid = f"{self.n:08x}"
        self.ts_ms += 1000
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.ts_ms / 1000)) + ".000Z"
        obj = {"type": ty, "id": eid, "parentId": self.parent, "timestamp": ts}
        obj.update(fields)
        self.write(obj)
        self.parent = eid
        return eid

    def turn(self, i, filler):
        usage = {"input": 1000 + i, "output": 200, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1200 + i,
                 "cost": {"input": 0.001, "output": 0.0008, "cacheRead": 0, "cacheWrite": 0, "total": 0.0018}}
        first = self.entry("message", message={"role": "user", "content": [
            {"type": "text", "text": f"Question {i}: please look at file_{i}.py and explain it."}],
            "timestamp": self.ts_ms})
        self.entry("message", message={
            "role": "assistant",
            "content": [{"type": "text", "text": f"Answer {i}. " + filler},
                        {"type": "toolCall", "id": f"call_{i}", "name": "read",
                         "arguments": {"path": f"file_{i}.py"}}],
            "api": "openai-completions", "provider": PROVIDER, "model": MODEL, "usage": usage,
            "stopReason": "toolUse", "timestamp": self.ts_ms})
        self.entry("message", message={
            "role": "toolResult", "toolCallId": f"call_{i}", "toolName": "read",
            "content": [{"type": "text", "text": f"# file_{i}.py\n" + filler + filler}],
            "isError": False, "timestamp": self.ts_ms})
        self.entry("message", message={
            "role": "assistant", "content": [{"type": "text", "text": f"Done with {i}."}],
            "api": "openai-completions", "provider": PROVIDER, "model": MODEL, "usage": usage,
            "stopReason": "stop", "timestamp": self.ts_ms})
        return first


def generate(path, size, shape, cwd):
    filler = ("lorem ipsum dolor sit amet, consectetur adipiscing elit; " * 40)
    with open(path, "w", encoding="utf-8", buffering=1 << 20) as f:
        g = Gen(f, cwd)
        g.entry("model_change", provider=PROVIDER, modelId=MODEL)
        g.entry("thinking_level_change", thinkingLevel="off")
        i = 0
        while g.bytes < size:
            g.turn(i, filler)
            i += 1
        if shape == "compacted":
            kept = [g.turn(i + k, filler) for k in range(3)]
            g.entry("compaction", summary="Summary of everything before. " * 20, firstKeptEntryId=kept[0],
                    tokensBefore=123456, details={"readFiles": [], "modifiedFiles": []})
            for k in range(3):
                g.turn(i + 3 + k, filler)
    return os.path.getsize(path)


def run_root(base):
    root = tempfile.mkdtemp(prefix="pi-bench-sess-", dir=base)
    for d in ("cwd", "agent", "home", "tmp"):
        os.makedirs(os.path.join(root, d))
    models = {"providers": {PROVIDER: {"api": "openai-completions", "apiKey": "bench-key",
                                       "baseUrl": "http://127.0.0.1:9/v1",
                                       "models": [{"id": MODEL, "name": "Bench", "reasoning": False,
                                                   "input": ["text"], "contextWindow": 128000,
                                                   "maxTokens": 4096}]}}}
    with open(os.path.join(root, "agent", "models.json"), "w") as f:
        json.dump(models, f)
    with open(os.path.join(root, "agent", "settings.json"), "w") as f:
        json.dump({"defaultProvider": PROVIDER, "defaultModel": MODEL}, f)
    return root


def env_for(root):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(root, "home"),
            "TMPDIR": os.path.join(root, "tmp"), "PI_CODING_AGENT_DIR": os.path.join(root, "agent"),
            "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0", "LANG": "C.UTF-8"}


class Proc:
    def __init__(self, argv, root, timeout):
        self.p = subprocess.Popen(argv, cwd=os.path.join(root, "cwd"), env=env_for(root), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf = b""
        self.deadline = time.monotonic() + timeout

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def response(self, rid):
        """Reads lines until the response with id `rid`; returns (success, byte length).
        Lines are not kept: only each line's first 400 bytes are inspected."""
        fd = self.p.stdout.fileno()
        head = bytearray()
        length = 0
        pending = self.buf
        self.buf = b""
        while True:
            while pending:
                nl = pending.find(b"\n")
                part = pending if nl < 0 else pending[:nl]
                if len(head) < 400:
                    head += part[:400 - len(head)]
                length += len(part)
                if nl < 0:
                    pending = b""
                    break
                pending = pending[nl + 1:]
                h = bytes(head)
                head = bytearray()
                n, length = length, 0
                if b'"response"' in h and (f'"id":"{rid}"'.encode() in h or f'"id": "{rid}"'.encode() in h):
                    self.buf = pending
                    return (b'"success":true' in h or b'"success": true' in h), n
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                raise TimeoutError
            pending = os.read(fd, 1 << 20)
            if not pending:
                raise EOFError

    def hwm_mb(self):
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for l in f:
                    if l.startswith("VmHWM:"):
                        return int(l.split()[1]) / 1024
        except OSError:
            pass
        return None

    def cpu_s(self):
        """CPU time (user + system) the process has used so far: unlike wall time, not
        inflated by other load on the machine."""
        try:
            with open(f"/proc/{self.p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def measure(agent, file, base, timeout):
    out = {}
    argv = shlex.split(agent)
    root = run_root(base)
    try:
        # open
        t0 = time.perf_counter()
        p = Proc(argv + ["--mode", "rpc", "--session", file], root, timeout)
        try:
            p.send({"id": "s", "type": "get_state"})
            ok, _ = p.response("s")
            out["open_s"] = time.perf_counter() - t0 if ok else "error"
            out["open_cpu_s"] = p.cpu_s()
            out["open_rss_mb"] = p.hwm_mb()
        except (TimeoutError, EOFError) as e:
            out["open_s"] = type(e).__name__
        finally:
            p.close()
        # messages
        p = Proc(argv + ["--mode", "rpc", "--session", file], root, timeout)
        try:
            p.send({"id": "s", "type": "get_state"})
            p.response("s")
            t0 = time.perf_counter()
            p.send({"id": "m", "type": "get_messages"})
            ok, n = p.response("m")
            out["messages_s"] = time.perf_counter() - t0 if ok else "error"
            out["messages_bytes"] = n
            out["messages_rss_mb"] = p.hwm_mb()
        except (TimeoutError, EOFError) as e:
            out["messages_s"] = type(e).__name__
            out["messages_rss_mb"] = p.hwm_mb()
        finally:
            p.close()
        # switch
        p = Proc(argv + ["--mode", "rpc", "--no-session"], root, timeout)
        try:
            p.send({"id": "s", "type": "get_state"})
            p.response("s")
            t0 = time.perf_counter()
            p.send({"id": "w", "type": "switch_session", "sessionPath": file})
            ok, _ = p.response("w")
            out["switch_s"] = time.perf_counter() - t0 if ok else "error"
            out["switch_rss_mb"] = p.hwm_mb()
        except (TimeoutError, EOFError) as e:
            out["switch_s"] = type(e).__name__
        finally:
            p.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


def fmt(v, unit):
    if isinstance(v, (int, float)):
        return f"{v:.2f}{unit}" if unit == "s" else f"{v:.0f}{unit}"
    return str(v) if v is not None else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", required=True)
    ap.add_argument("--upstream")
    ap.add_argument("--sizes", default="100M,1G")
    ap.add_argument("--shapes", default="linear,compacted")
    ap.add_argument("--upstream-max-size", default="1G")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    ours = os.path.abspath(a.ours) if os.path.exists(a.ours) else a.ours
    agents = [("ours", ours)]
    if a.upstream:
        agents.append(("upstream", a.upstream))
    up_max = parse_size(a.upstream_max_size)
    results = []
    print(f"{'size':>6} {'shape':<10} {'agent':<9} {'file':>7} {'open':>8} {'openCPU':>8} {'openRSS':>8} "
          f"{'switch':>8} {'msgs':>8} {'msgsRSS':>8} {'msgsOut':>8}")
    for size in [parse_size(s) for s in a.sizes.split(",")]:
        for shape in a.shapes.split(","):
            gen_dir = tempfile.mkdtemp(prefix="pi-bench-files-", dir=a.dir)
            cwd = os.path.join(gen_dir, "cwd")
            os.makedirs(cwd)
            path = os.path.join(gen_dir, f"bench-{shape}-{human(size)}.jsonl")
            t0 = time.perf_counter()
            actual = generate(path, size, shape, cwd)
            gen_s = time.perf_counter() - t0
            try:
                for label, agent in agents:
                    if label == "upstream" and size > up_max:
                        continue
                    before = open(path, "rb").read(0) or os.path.getsize(path)
                    r = measure(agent, path, a.dir, a.timeout)
                    changed = os.path.getsize(path) != before
                    r.update({"size": actual, "shape": shape, "agent": label, "gen_s": gen_s,
                              "file_changed": changed})
                    results.append(r)
                    print(f"{human(size):>6} {shape:<10} {label:<9} {human(actual):>7} "
                          f"{fmt(r.get('open_s'), 's'):>8} {fmt(r.get('open_cpu_s'), 's'):>8} "
                          f"{fmt(r.get('open_rss_mb'), 'M'):>8} "
                          f"{fmt(r.get('switch_s'), 's'):>8} {fmt(r.get('messages_s'), 's'):>8} "
                          f"{fmt(r.get('messages_rss_mb'), 'M'):>8} "
                          f"{human(r['messages_bytes']) if r.get('messages_bytes') else '-':>8}",
                          flush=True)
            finally:
                if not a.keep:
                    shutil.rmtree(gen_dir, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
