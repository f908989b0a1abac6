#!/usr/bin/env bash
# One command from a fresh checkout to a running agent: builds `pi`, starts the project's own
# scripted model server (fakellm) on 127.0.0.1, points a throwaway agent directory at it and
# drives `pi --mode rpc` with one prompt. The model's scripted answer calls the bash tool, which
# really runs `ls` in the current directory. Every protocol line is printed.
#
# With a real provider instead: ANTHROPIC_API_KEY=... target/release/pi --mode rpc
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
cargo build --release -q -p pi-coding-agent --bin pi -p pi-fakellm --bin fakellm
ROOT=$(mktemp -d)
trap 'kill "$FAKE_PID" 2>/dev/null || true; rm -rf "$ROOT"' EXIT
mkfifo "$ROOT/port"
target/release/fakellm --script demo/script.json > "$ROOT/port" &
FAKE_PID=$!
PORT=$(head -n1 "$ROOT/port" | awk '{print $2}')
mkdir -p "$ROOT/agent"
cat > "$ROOT/agent/models.json" <<JSON
{"providers": {"demo": {"baseUrl": "http://127.0.0.1:$PORT/v1", "api": "openai-completions",
  "apiKey": "demo-key",
  "models": [{"id": "demo-model", "name": "Demo (scripted)", "reasoning": false, "input": ["text"],
              "contextWindow": 32000, "maxTokens": 4096,
              "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}]}}}
JSON
echo '{"defaultProvider": "demo", "defaultModel": "demo-model"}' > "$ROOT/agent/settings.json"
{
  echo '{"id":"p1","type":"prompt","message":"What files are here?"}'
  sleep 2
  echo '{"id":"s1","type":"get_state"}'
} | PI_CODING_AGENT_DIR="$ROOT/agent" target/release/pi --mode rpc --no-session
