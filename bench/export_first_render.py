#!/usr/bin/env python3
"""Time to first render of the HTML export of a ~100 MB session, in headless Chromium.

1. Writes a synthetic session (upstream's v3 JSONL) of about --mb megabytes: turns of a user
   message, an assistant message with a bash or read tool call, a tool result with a long
   output (--output-kb, default 48 KB, many lines), and an assistant answer.
2. Exports it with `<pi> --export <session> <page>` (timed).
3. Starts `chromium --headless --remote-debugging-port=0` on about:blank and drives it over the
   DevTools protocol (a minimal WebSocket client below; stdlib only). Before navigating, it
   registers (Page.addScriptToEvaluateOnNewDocument) a PerformanceObserver for `longtask`
   entries, so every main-thread task of 50 ms or more is recorded. Then Page.navigate to the
   file:// URL, and it polls (Runtime.evaluate) until the page's "pi-render-done" mark exists.
4. Reads, all relative to the page's navigation start (performance.timeOrigin):
   - `first-contentful-paint` (Paint Timing): the first frame showing anything; the page shows
     nothing before the viewer's first batch (the session data is in a non-rendered
     <script>), so this is the time to first render;
   - the viewer's User Timing marks: pi-data-decoded, pi-first-render (first batch of messages
     in the DOM), pi-render-done (the last batch);
   - long tasks: the longest one after first render says whether the page froze while the
     rest rendered in batches; also the round-trip times of the polls (each Runtime.evaluate
     waits for the main thread).
Usage: python3 bench/export_first_render.py --pi target/release/pi [--mb 100] [--runs 3]
       [--chromium chromium] [--json FILE] [--keep DIR]
Python 3 standard library only, Linux.
"""
import argparse
import base64
import json
import os
import random
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


# ---- session ---------------------------------------------------------------------------------
def write_session(path, mb, output_kb):
    rnd = random.Random(7)
    words = ("alpha beta gamma delta retry backoff client server request response error "
             "token stream parse buffer socket index cache commit branch merge").split()
    pool = [" ".join(rnd.choice(words) for _ in range(12)) for _ in range(4000)]
    target = mb * 1_000_000
    n = 0
    parent = None

    def line(f, obj):
        f.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")

    with open(path, "w", encoding="utf-8") as f:
        line(f, {"type": "session", "version": 3, "id": "019ad7e2-0000-7a10-9c2e-5d1f0b7a4e21",
                 "timestamp": "2026-12-01T09:00:00.000Z", "cwd": "/home/dev/big"})

        def entry(body):
            nonlocal n, parent
            n += 1
            eid = "%08x" % n
            e = {"type": body.pop("type", "message"), "id": eid, "parentId": parent,
                 "timestamp": "2026-12-01T09:00:00.000Z"}
            e.update(body)
            line(f, e)
            parent = eid
            return eid

        usage = {"input": 1200, "output": 80, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1280,
                 "cost": {"input": 0.0036, "output": 0.0012, "cacheRead": 0, "cacheWrite": 0,
                          "total": 0.0048}}

        def assistant(content, stop):
            return {"message": {"role": "assistant", "content": content, "api": "openai-completions",
                                "provider": "bench", "model": "bench-model", "usage": usage,
                                "stopReason": stop, "timestamp": 1796112000000 + n}}

        entry({"type": "model_change", "provider": "bench", "modelId": "bench-model"})
        turn = 0
        while f.tell() < target:
            turn += 1
            entry({"message": {"role": "user", "timestamp": 1796112000000 + n,
                               "content": "Turn %d: look at `src/mod_%d.rs` and run the tests." % (turn, turn)}})
            tool = "bash" if turn % 2 else "read"
            args = ({"command": "cargo test -p crate_%d -- --nocapture" % turn} if tool == "bash"
                    else {"path": "src/mod_%d.rs" % turn})
            call = "call_%d" % turn
            entry(assistant([{"type": "text", "text": "Checking **turn %d**." % turn},
                             {"type": "toolCall", "id": call, "name": tool, "arguments": args}],
                            "toolUse"))
            out, size = [], 0
            while size < output_kb * 1024:
                l = "%5d  %s" % (len(out) + 1, rnd.choice(pool))
                out.append(l)
                size += len(l) + 1
            entry({"message": {"role": "toolResult", "toolCallId": call, "toolName": tool,
                               "content": [{"type": "text", "text": "\n".join(out)}],
                               "isError": False, "timestamp": 1796112000000 + n}})
            entry(assistant([{"type": "text", "text": "Turn %d looks fine:\n\n- %d lines of output\n- no errors"
                                                      % (turn, len(out))}], "stop"))
    return n, turn


# ---- a minimal DevTools-protocol client over WebSocket (RFC 6455, text frames) ---------------
class Cdp:
    def __init__(self, ws_url):
        rest = ws_url.split("://", 1)[1]
        hostport, path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key))
        self.sock.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("DevTools closed during the handshake")
            buf += chunk
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("WebSocket handshake failed: %r" % head[:200])
        self.next_id = 0

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("DevTools connection closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _send_frame(self, opcode, payload):
        head = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _message(self):
        data = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            op = b0 & 0x0F
            if op == 9:
                self._send_frame(10, payload)
                continue
            if op == 8:
                raise RuntimeError("DevTools closed the connection")
            data += payload
            if b0 & 0x80:
                return json.loads(data.decode("utf-8"))

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self._send_frame(1, json.dumps({"id": mid, "method": method, "params": params}).encode())
        while True:
            msg = self._message()
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")


OBSERVER = """
window.__piLongTasks = [];
try {
  new PerformanceObserver(function (l) {
    l.getEntries().forEach(function (e) { window.__piLongTasks.push([e.startTime, e.duration]); });
  }).observe({type: "longtask", buffered: true});
} catch (e) {}
"""

READ = """JSON.stringify({
  origin: performance.timeOrigin,
  fcp: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime,
  fp: (performance.getEntriesByName("first-paint")[0] || {}).startTime,
  marks: performance.getEntriesByType("mark").map(function (m) { return [m.name, m.startTime]; }),
  longTasks: window.__piLongTasks || [],
  messages: document.querySelectorAll(".msg").length,
  nodes: document.querySelectorAll("#side .node").length
})"""


def measure(chromium, page, timeout):
    profile = tempfile.mkdtemp(prefix="pi-bench-chromium-")
    proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                             "--no-first-run", "--disable-dev-shm-usage",
                             "--window-size=1280,1600", "--remote-debugging-port=0",
                             "--user-data-dir=" + profile, "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port))
        ws = next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")
        cdp = Cdp(ws)
        cdp.call("Page.enable")
        cdp.call("Page.addScriptToEvaluateOnNewDocument", source=OBSERVER)
        wall0 = time.perf_counter()
        cdp.call("Page.navigate", url="file://" + os.path.abspath(page))
        polls, done_wall = [], None
        deadline = time.time() + timeout
        while time.time() < deadline:
            t = time.perf_counter()
            done = cdp.eval("location.protocol === 'file:' && "
                            "performance.getEntriesByName('pi-render-done').length > 0")
            polls.append((t - wall0, time.perf_counter() - t))
            if done:
                done_wall = time.perf_counter() - wall0
                break
            time.sleep(0.02)
        if done_wall is None:
            raise RuntimeError("the page did not finish rendering within %ss" % timeout)
        time.sleep(0.3)
        r = json.loads(cdp.eval(READ))
        marks = dict((k, v) for k, v in reversed(r["marks"]))  # first of each name
        first = marks.get("pi-first-render")
        after = [d for s, d in r["longTasks"] if first is not None and s >= first]
        before = [d for s, d in r["longTasks"] if first is None or s < first]
        return {
            "fcp_ms": r["fcp"], "first_paint_ms": r["fp"],
            "decoded_ms": marks.get("pi-data-decoded"), "first_render_ms": first,
            "render_done_ms": marks.get("pi-render-done"),
            "longest_task_before_first_render_ms": max(before, default=0),
            "longest_task_after_first_render_ms": max(after, default=0),
            "long_tasks_after_first_render": len(after),
            "slowest_poll_after_first_render_ms": 1000 * max(
                [d for s, d in polls if first is not None and s * 1000 >= (r["fcp"] or first)], default=0),
            "messages_rendered": r["messages"], "tree_nodes": r["nodes"],
            "wall_to_done_s": done_wall,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pi", default="target/release/pi")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--output-kb", type=int, default=48)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json")
    ap.add_argument("--keep")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="pi-bench-export-")
    os.makedirs(work, exist_ok=True)
    try:
        session = os.path.join(work, "big.jsonl")
        page = os.path.join(work, "big.html")
        entries, turns = write_session(session, args.mb, args.output_kb)
        t = time.perf_counter()
        subprocess.run([args.pi, "--export", session, page], check=True, stdout=subprocess.DEVNULL)
        export_s = time.perf_counter() - t
        print("session: %.1f MB, %d entries, %d turns; page: %.1f MB; pi --export: %.2f s"
              % (os.path.getsize(session) / 1e6, entries, turns, os.path.getsize(page) / 1e6, export_s))
        runs = []
        for i in range(args.runs):
            r = measure(args.chromium, page, args.timeout)
            runs.append(r)
            print("run %d: %s" % (i + 1, json.dumps({k: (round(v, 1) if isinstance(v, float) else v)
                                                       for k, v in r.items()})))
        keys = ["fcp_ms", "decoded_ms", "first_render_ms", "render_done_ms",
                "longest_task_before_first_render_ms", "longest_task_after_first_render_ms",
                "slowest_poll_after_first_render_ms"]
        print("median over %d runs:" % len(runs))
        for k in keys:
            vals = [r[k] for r in runs if r[k] is not None]
            if vals:
                print("  %-40s %9.1f  (min %.1f, max %.1f)" % (k, statistics.median(vals), min(vals), max(vals)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"export_s": export_s, "entries": entries, "runs": runs}, f, indent=1)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
