#!/usr/bin/env python3
"""Record what an agent sends over the Codex transports (WebSocket, SSE fallback, zstd).

Usage: record_ws.py --fakellm target/debug/fakellm --out DIR [--agent CMD...]
  (default agent: upstream pi 1.6 under Node 22; CMD is split on spaces)

Writes `openai-codex-ws-<scenario>.json` for each scenario below: the fake's WebSocket upgrade
attempts (headers), every model request (method `WS` = a `response.create` frame, `POST` = SSE;
zstd bodies decoded), the RPC events that matter (`message_end` of assistants,
`auto_retry_*`). Prose (system prompt, tool texts) and the per-run session id are masked.
Node's zstd is left on, so SSE bodies are compressed as upstream sends them. The compressed
bytes hold upstream's prose, so they are not kept: instead each one is checked to be exactly
Node's `zstdCompressSync` at level 3 of its decoded text (`zstd_level3: true`), and
`zstd_probe` holds that function's output for the first masked body (text and base64), which
our compressor must reproduce byte for byte. The test `rpc_codex_ws` replays the scenarios
through our `pi`.
"""
import argparse, json, os, re, subprocess, sys, tempfile, threading, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from record import NODE, CLI, jwt, mask_prose  # noqa: E402

TEXT = {"api": "responses", "blocks": [{"type": "text", "text": "Hello over the socket."}],
        "usage": {"input": 100, "output": 6}}
TOOL = {"api": "responses", "blocks": [{"type": "tool_call", "name": "bash",
                                        "arguments": {"command": "echo hi"}}],
        "usage": {"input": 120, "output": 10}}
AFTER = {"api": "responses", "blocks": [{"type": "text", "text": "It printed hi."}],
         "usage": {"input": 150, "output": 5}}
AGAIN = {"api": "responses", "blocks": [{"type": "text", "text": "Still here."}],
         "usage": {"input": 170, "output": 3}}

NOT_FOUND = {"api": "responses", "error": {"status": 400, "body": {"error": {
    "type": "invalid_request_error", "code": "previous_response_not_found",
    "message": "Previous response with id 'resp_fake_1' not found.", "param": "previous_response_id"}}}}

SCENARIOS = {
    # WebSocket accepted: a text turn, a tool call round trip, another text turn (one socket).
    "websocket": {"websocket": True, "turns": [TEXT, TOOL, AFTER, AGAIN],
                  "commands": ["Say hello", "Run echo hi", "Once more"]},
    # Upgrade refused: SSE with zstd bodies; the session stays on SSE afterwards.
    "refused": {"websocket": False, "turns": [TEXT, TOOL, AFTER],
                "commands": ["Say hello", "Run echo hi"]},
    # The socket drops after 4 frames of the first answer; auto-retry on (fast).
    "dropped": {"websocket": True, "turns": [dict(TEXT, disconnect_after_events=4), AGAIN],
                "commands": ["Say hello"],
                "settings": {"retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 50}}},
    # The server lost the previous response: the continuation (`previous_response_id`) is
    # answered with an `error` event `previous_response_not_found`, and the request is sent
    # again with the full context.
    "not-found": {"websocket": True, "turns": [TEXT, NOT_FOUND, AGAIN],
                  "commands": ["Say hello", "Once more"]},
}


ZSTD_JS = r"""
const z = require('zlib'); const inp = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const lvl = {params: {[z.constants.ZSTD_c_compressionLevel]: 3}};
const out = inp.encoded.map(b => { const buf = Buffer.from(b, 'base64');
  return Buffer.compare(z.zstdCompressSync(z.zstdDecompressSync(buf), lvl), buf) === 0; });
const probe = inp.probe === null ? null : z.zstdCompressSync(Buffer.from(inp.probe), lvl).toString('base64');
process.stdout.write(JSON.stringify({out, probe}));
"""


def zstd_checks(reqs):
    """Mark each zstd request `zstd_level3` and return the probe (see the module doc)."""
    enc = [r for r in reqs if r.get("encoded_body")]
    probe_text = json.dumps(enc[0]["body"], separators=(",", ":")) if enc else None
    res = json.loads(subprocess.run([NODE, "-e", ZSTD_JS], input=json.dumps(
        {"encoded": [r["encoded_body"] for r in enc], "probe": probe_text}),
        capture_output=True, text=True, check=True).stdout)
    for r, ok in zip(enc, res["out"]):
        r["zstd_level3"] = ok
        del r["encoded_body"]
    return None if probe_text is None else {"text": probe_text, "zstd_base64": res["probe"]}


def mask(value, session):
    text = json.dumps(value)
    if session:
        text = text.replace(session, "<session id>")
    return json.loads(text)


def run(fakellm, agent_cmd, name, sc, out_dir):
    root = tempfile.mkdtemp(prefix="pi-record-ws-")
    script = {"default_chunk_size": 6, "websocket": sc["websocket"], "turns": sc["turns"]}
    path = os.path.join(root, "script.json")
    json.dump(script, open(path, "w"))
    fake = subprocess.Popen([fakellm, "--script", path], stdout=subprocess.PIPE, text=True)
    port = int(fake.stdout.readline().split()[1])
    model = {"id": "fake-gpt5", "name": "Fake GPT-5", "reasoning": True, "input": ["text"],
             "contextWindow": 200000, "maxTokens": 64000,
             "cost": {"input": 1.25, "output": 10.0, "cacheRead": 0.125, "cacheWrite": 0}}
    provider = {"api": "openai-codex-responses", "apiKey": jwt("acct-fake-1"),
                "baseUrl": f"http://127.0.0.1:{port}/backend-api", "models": [model]}
    dirs = {k: os.path.join(root, k) for k in ("cwd", "agent", "home", "tmp")}
    for d in dirs.values():
        os.makedirs(d)
    json.dump({"providers": {"fake-resp": provider}}, open(os.path.join(dirs["agent"], "models.json"), "w"))
    settings = {"defaultProvider": "fake-resp", "defaultModel": "fake-gpt5", "defaultThinkingLevel": "off",
                "compaction": {"enabled": False}, "retry": {"enabled": False}}
    settings.update(sc.get("settings", {}))
    json.dump(settings, open(os.path.join(dirs["agent"], "settings.json"), "w"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": dirs["home"], "TMPDIR": dirs["tmp"],
           "LANG": "C.UTF-8", "TZ": "UTC", "PI_CODING_AGENT_DIR": dirs["agent"], "PI_OFFLINE": "1",
           "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"}
    agent = subprocess.Popen(agent_cmd + ["--mode", "rpc", "--no-session"], cwd=dirs["cwd"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, cond = [], threading.Condition()

    def reader():
        for line in agent.stdout:
            with cond:
                lines.append(line)
                cond.notify_all()
    threading.Thread(target=reader, daemon=True).start()

    def events():
        with cond:
            return [json.loads(l) for l in lines if l.strip().startswith("{")]

    for i, text in enumerate(sc["commands"]):
        start = len(events())
        agent.stdin.write(json.dumps({"type": "prompt", "message": text, "id": f"c{i}"}) + "\n")
        agent.stdin.flush()
        end = time.time() + 60
        while not any(e.get("type") == "agent_end" for e in events()[start:]):
            if time.time() > end:
                raise TimeoutError(f"{name}: {agent.stderr.read() if agent.poll() is not None else ''}")
            time.sleep(0.05)
        time.sleep(0.3)
    agent.stdin.close()
    try:
        agent.wait(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
    reqs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/_fake/requests"))
    ups = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/_fake/ws_upgrades"))
    fake.kill()
    session = None
    for r in reqs + ups:
        session = session or r["headers"].get("session-id")
    for r in reqs + ups:
        r.pop("t", None)
        r["body"] = mask_prose(r.get("body"))
    reqs, ups = mask(reqs, session), mask(ups, session)
    probe = zstd_checks(reqs)
    evs = events()
    kept = [e for e in evs if e.get("type") in ("auto_retry_start", "auto_retry_end")
            or (e.get("type") == "message_end" and e.get("message", {}).get("role") == "assistant")]
    for e in kept:
        for d in e.get("message", {}).get("diagnostics") or []:
            if isinstance(d.get("error"), dict):
                d["error"].pop("stack", None)  # upstream's file paths
    base = provider["baseUrl"].replace(str(port), "{port}")
    out = {"scenario": name, "provider": dict(provider, baseUrl=base), "settings": settings,
           "script": script, "commands": sc["commands"],
           "ws_upgrades": ups, "requests": reqs,
           "events": mask(kept, session), "zstd_probe": probe}
    text = json.dumps(out, indent=1).replace(f"127.0.0.1:{port}", "127.0.0.1:{port}")
    open(os.path.join(out_dir, f"openai-codex-ws-{name}.json"), "w").write(text + "\n")
    print(f"{name}: {len(ups)} upgrades, {len(reqs)} requests, {len(kept)} events")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fakellm", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--agent", default=f"{NODE} {CLI}")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, sc in SCENARIOS.items():
        if not a.only or a.only == name:
            run(a.fakellm, a.agent.split(" "), name, sc, a.out)


if __name__ == "__main__":
    main()
