#!/usr/bin/env python3
"""Load-independent costs of the grep/find tools on speed.py's search tree (issue 15).

* cpu    - CPU time (user + system, every thread, from getrusage(RUSAGE_CHILDREN) once the
           process has exited) per whole-tree grep and full find: N tool calls in one
           `pi --mode rpc` process minus the same process with N text-only turns; bare rg/fd
           the same way over N runs (their process start included).
* strace - one tool call per query in its own process under `strace -f`: the statx/openat of
           ignore files (.gitignore, .ignore, .rgignore, .fdignore), VCS markers (.git, .jj) and
           files under .git/, by name and outcome, and all other opens, inside the tree.

    python3 bench/search_cost.py cpu strace --agent target/release/pi [--agent OTHER ...]

Python 3 standard library (and strace for `strace`); imports bench/speed.py for the tree, the
queries and the RPC client.
"""

import argparse
import collections
import os
import re
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import speed  # noqa: E402

TRACED = "trace=openat,open,stat,lstat,newfstatat,statx,access,faccessat,faccessat2,readlink"
MARKERS = (".gitignore", ".ignore", ".rgignore", ".fdignore", ".git", ".jj")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def agent_session(args, argv, tree, calls):
    """Runs one agent process through `calls` (tool, arguments or None for a text turn)."""
    turns = []
    for tool, targs in calls:
        if tool:
            turns.append({"blocks": [{"type": "tool_call", "name": tool,
                                      "arguments": dict(targs, path=tree)}]})
        turns.append({"blocks": [{"type": "text", "text": "ok"}]})
    fake = speed.Fake(args.fakellm, {"default_chunk_size": 64, "turns": turns}, args.workdir)
    try:
        agent = speed.Agent(argv, fake.port, args.workdir, cwd=tree, tools="read,grep,find,ls")
        try:
            agent.state()
            for _ in calls:
                agent.prompt_timed("q")
        finally:
            agent.close()
    finally:
        fake.close()


def run_cpu(args, tree):
    bare = speed.bare_commands(tree)
    n = args.n
    for pi in args.agent:
        c0 = children_cpu()
        agent_session(args, [pi], tree, [(None, None)] * n)
        base = children_cpu() - c0
        for label, tool, targs in speed.QUERIES:
            if label not in ("grep whole tree", "find full"):
                continue
            c0 = children_cpu()
            agent_session(args, [pi], tree, [(tool, targs)] * n)
            cpu = children_cpu() - c0
            print(f"cpu {pi} | {label}: {(cpu - base) / n * 1000:.1f} ms per query")
    for label in ("grep whole tree", "find full"):
        if not bare[label]:
            continue
        c0 = children_cpu()
        for _ in range(n):
            subprocess.run(bare[label], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(f"cpu {bare[label][0]} | {label}: {(children_cpu() - c0) / n * 1000:.1f} ms per run")


def run_strace(args, tree):
    pat = re.compile(r'(openat|open|statx|newfstatat|stat|lstat|access|faccessat2?|readlink)'
                     r'\((?:AT_FDCWD, |\d+, )?"([^"]*)"')
    for pi in args.agent:
        for label, tool, targs in speed.QUERIES:
            out = os.path.join(args.workdir, "strace.txt")
            argv = ["strace", "-f", "-qq", "-o", out, "-e", TRACED, pi]
            agent_session(args, argv, tree, [(tool, targs)])
            counts = collections.Counter()
            with open(out) as f:
                for line in f:
                    m = pat.search(line)
                    if not m or not m.group(2).startswith(tree):
                        continue
                    call, path = m.group(1), m.group(2)
                    base = os.path.basename(path)
                    if base in MARKERS:
                        cat = base
                    elif "/.git/" in path:
                        cat = ".git/..."
                    else:
                        cat = "other"
                    counts[f"{cat} {call}{' ENOENT' if ' = -1 ' in line else ''}"] += 1
                    if cat != "other":
                        counts["= ignore/VCS total"] += 1
            os.remove(out)
            print(f"strace {pi} | {label}: " +
                  ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modes", nargs="+", choices=["cpu", "strace"])
    ap.add_argument("--agent", action="append", required=True, help="a pi binary (repeatable)")
    ap.add_argument("--fakellm", default="target/release/fakellm")
    ap.add_argument("--files", type=int, default=6000)
    ap.add_argument("--n", type=int, default=10, help="cpu: queries per figure")
    ap.add_argument("--workdir", default="/tmp/pi-speed-bench")
    args = ap.parse_args()
    args.agent = [os.path.abspath(a) for a in args.agent]
    args.fakellm = os.path.abspath(args.fakellm)
    os.makedirs(args.workdir, exist_ok=True)
    tree = os.path.join(args.workdir, "tree")
    speed.make_tree(tree, args.files)
    print(f"load average: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for mode in args.modes:
        {"cpu": run_cpu, "strace": run_strace}[mode](args, tree)


if __name__ == "__main__":
    sys.exit(main())
