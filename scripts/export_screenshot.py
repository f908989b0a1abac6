#!/usr/bin/env python3
"""Builds a small demo session, exports it with `pi --export` and screenshots the page.

The session (upstream's v3 JSONL format: header line, then entries linked by id/parentId)
has a user message with an image content block (a PNG generated here), an assistant turn
that reads a file, edits it (the tool result carries `details.diff` as our edit tool writes
it) and runs bash, a closing markdown answer, and a second branch that starts from an
earlier entry. The screenshot is taken with headless Chromium at 1280x1600.

Usage: python3 scripts/export_screenshot.py [--pi target/release/pi] [--out docs/export.png]
       [--chromium chromium] [--keep DIR]
Python 3 standard library only.
"""
import argparse
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def png(width, height, pixel):
    """A truecolour PNG; `pixel(x, y)` returns (r, g, b)."""
    raw = bytearray()
    for y in range(height):
        raw.append(0)
        for x in range(width):
            raw.extend(pixel(x, y))

    def chunk(kind, body):
        c = struct.pack(">I", len(body)) + kind + body
        return c + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def chart_png():
    """A small bar chart: request latency per build, as a user might paste it."""
    w, h = 320, 140
    bars = [92, 80, 101, 64, 48, 40, 31, 26]

    def pixel(x, y):
        if y >= h - 12 or x < 14:
            return (238, 236, 230)
        i, off = divmod(x - 14, 38)
        if i < len(bars) and 6 <= off < 32 and y >= h - 12 - bars[i]:
            return (43, 108, 176) if i < 4 else (46, 160, 90)
        return (255, 255, 255) if (y // 20) % 2 else (248, 248, 246)
    return png(w, h, pixel)


def build_session(path):
    ts = iter(range(10_000))

    def stamp():
        n = next(ts)
        return "2026-12-01T09:%02d:%02d.%03dZ" % (12 + n // 60, n % 60, (n * 37) % 1000)

    def ms():
        return 1796116320000 + next(ts) * 1000

    entries = []

    def add(eid, parent, body):
        e = {"type": body.pop("type", "message"), "id": eid, "parentId": parent,
             "timestamp": stamp()}
        e.update(body)
        entries.append(e)
        return eid

    def usage(i, o, cr=0):
        cost = {"input": i * 3e-6, "output": o * 15e-6, "cacheRead": cr * 3e-7, "cacheWrite": 0}
        cost["total"] = sum(cost.values())
        return {"input": i, "output": o, "cacheRead": cr, "cacheWrite": 0,
                "totalTokens": i + o + cr, "cost": cost}

    def assistant(content, stop, u):
        return {"message": {"role": "assistant", "content": content, "api": "anthropic-messages",
                            "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": u,
                            "stopReason": stop, "timestamp": ms()}}

    def result(call_id, tool, text, details=None):
        m = {"role": "toolResult", "toolCallId": call_id, "toolName": tool,
             "content": [{"type": "text", "text": text}], "isError": False, "timestamp": ms()}
        if details is not None:
            m["details"] = details
        return {"message": m}

    old_src = ("use std::time::Duration;\n\n/// Waits before the next retry.\n"
               "pub fn backoff(attempt: u32) -> Duration {\n"
               "    Duration::from_millis(500)\n}\n")
    m0 = add("a1f0c2d4", None, {"type": "model_change", "provider": "anthropic",
                                "modelId": "claude-sonnet-4-5"})
    t0 = m0
    img = base64.b64encode(chart_png()).decode()
    u1 = add("c3d8e5f1", t0, {"message": {"role": "user", "timestamp": ms(), "content": [
        {"type": "text", "text": "Retries hammer the server: every attempt waits the same 500 ms. "
                                 "Make `backoff` in `src/retry.rs` exponential (capped at 8 s). "
                                 "Latency per build before/after my local hack:"},
        {"type": "image", "data": img, "mimeType": "image/png"}]}})
    a1 = add("d4a09b37", u1, assistant([
        {"type": "thinking", "thinking": "Read the file first, then replace the constant delay "
                                         "with 500 ms * 2^attempt, saturating, capped at 8 s."},
        {"type": "text", "text": "Let me look at the current implementation."},
        {"type": "toolCall", "id": "toolu_01", "name": "read", "arguments": {"path": "src/retry.rs"}}],
        "toolUse", usage(2140, 61, 11200)))
    r1 = add("e5b1c6d8", a1, result("toolu_01", "read", old_src))
    new_body = ("    let ms = 500u64.saturating_mul(1 << attempt.min(5));\n"
                "    Duration::from_millis(ms.min(8_000))\n")
    a2 = add("f6c2d7e9", r1, assistant([
        {"type": "text", "text": "The delay is a constant. I'll double it per attempt and cap it."},
        {"type": "toolCall", "id": "toolu_02", "name": "edit", "arguments": {
            "path": "src/retry.rs",
            "edits": [{"oldText": "    Duration::from_millis(500)\n", "newText": new_body}]}}],
        "toolUse", usage(2390, 142, 11200)))
    diff = ("  ...\n 3 /// Waits before the next retry.\n 4 pub fn backoff(attempt: u32) -> Duration {\n"
            "-5     Duration::from_millis(500)\n"
            "+5     let ms = 500u64.saturating_mul(1 << attempt.min(5));\n"
            "+6     Duration::from_millis(ms.min(8_000))\n 7 }")
    r2 = add("a7d3e8f0", a2, result("toolu_02", "edit",
                                    "Successfully replaced 1 block(s) in src/retry.rs.",
                                    {"diff": diff, "firstChangedLine": 5}))
    a3 = add("b8e4f9a1", r2, assistant([
        {"type": "toolCall", "id": "toolu_03", "name": "bash",
         "arguments": {"command": "cargo test -q retry"}}], "toolUse", usage(2610, 38, 11200)))
    r3 = add("c9f5a0b2", a3, result("toolu_03", "bash",
                                    "running 3 tests\n...\ntest result: ok. 3 passed; 0 failed; "
                                    "0 ignored; 0 measured; 41 filtered out; finished in 0.00s"))
    a4 = add("d0a6b1c3", r3, assistant([{"type": "text", "text":
        "Done. `backoff` now grows exponentially:\n\n"
        "- attempt 0: **500 ms**, 1: 1 s, 2: 2 s, 3: 4 s\n"
        "- attempt 4 and later: capped at **8 s**\n\n"
        "The shift is bounded with `attempt.min(5)`, so it cannot overflow. All 3 retry tests pass."}],
        "stop", usage(2700, 120, 11200)))
    # A second branch from an earlier entry: the user went back to before the first prompt.
    u2 = add("e1b7c2d4", t0, {"message": {"role": "user", "timestamp": ms(), "content":
        "Before changing anything: where is `backoff` called from?"}})
    add("f2c8d3e5", u2, assistant([{"type": "text", "text":
        "Only from `Client::send_with_retry` in `src/client.rs`, once per failed attempt."}],
        "stop", usage(1980, 31, 0)))
    # The session ends on the first branch: make it the leaf again (a label on its last entry).
    add("a3d9e4f6", a4, {"type": "label", "targetId": a4, "label": "exponential backoff"})
    header = {"type": "session", "version": 3, "id": "019ad7e2-3c41-7a10-9c2e-5d1f0b7a4e21",
              "timestamp": "2026-12-01T09:12:00.000Z", "cwd": "/home/dev/retry-demo"}
    with open(path, "w", encoding="utf-8") as f:
        for line in [header] + entries:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pi", default="target/release/pi")
    ap.add_argument("--out", default="docs/export.png")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--keep", help="directory to keep the session and page in")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="pi-export-shot-")
    os.makedirs(work, exist_ok=True)
    session = os.path.join(work, "demo.jsonl")
    page = os.path.join(work, "demo.html")
    build_session(session)
    subprocess.run([args.pi, "--export", session, page], check=True)
    profile = tempfile.mkdtemp(prefix="pi-export-profile-")
    try:
        subprocess.run([args.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--disable-dev-shm-usage", "--hide-scrollbars",
                        "--force-color-profile=srgb", "--virtual-time-budget=3000",
                        "--user-data-dir=" + profile, "--window-size=1280,1600",
                        "--screenshot=" + os.path.abspath(args.out), "file://" + page],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    print("screenshot:", args.out, os.path.getsize(args.out), "bytes")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
