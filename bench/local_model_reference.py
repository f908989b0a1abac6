#!/usr/bin/env python3
"""Reference figures for `crates/coding-agent/examples/local_bench.rs` through llama-cpp-python.

Runs the same GGUF file on the same prompt tokens with the same settings as the Rust benchmark:
n_threads (prompt and generation), n_ctx, n_batch 512, greedy sampling, the same output cap.
The prompt is the text the Rust benchmark rendered (`--dump-prompt FILE`: turn 1 in FILE,
turn 2 in FILE.turn2), tokenized the way pi-local tokenizes it (special tokens parsed; BOS added
only when the text does not already start with it) and completed raw, so both sides evaluate
the same tokens.

Measured, medians over --runs (one unmeasured 1-token warm-up first, as in the Rust bench):
  load            Llama(...) constructor: model file + context
  turn 1          full prompt (cache reset): time to first token, prefill tok/s = prompt tokens /
                  TTFT, generation tok/s = (tokens - 1) / (last token - first token)
  turn 2          TTFT with llama-cpp-python's own prefix re-use (the state left by turn 1)
                  and after `reset()` (whole prompt evaluated)
  llama.cpp perf  prompt-eval and eval rates from llama_perf_context (pure decode time)
  peak RSS        VmHWM of this Python process (interpreter and numpy included; the RSS before
                  loading is printed as the baseline)

    /tmp/llpy/bin/python bench/local_model_reference.py --prompt /tmp/turn1.txt --threads 2

Needs `llama-cpp-python` (PyPI; builds llama.cpp from source). Linux only (/proc).
"""

import argparse
import json
import os
import statistics
import sys
import time


def status_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def median(values):
    values = [v for v in values if v == v]  # drop NaN
    return statistics.median(values) if values else float("nan")


def main():
    default_model = os.path.expanduser("~/.pi/agent/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=default_model)
    ap.add_argument("--prompt", required=True, help="turn-1 prompt text (local_bench --dump-prompt)")
    ap.add_argument("--prompt2", help="turn-2 prompt text (default: PROMPT.turn2 when present)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-ctx", type=int, default=8192)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--flash-attn", choices=["off", "on"], default="off",
                    help="llama-cpp-python's flash_attn (default off, its default; pi-local "
                         "leaves llama.cpp's 'auto', which enables it on the CPU)")
    ap.add_argument("--json", help="write every sample and the medians here")
    args = ap.parse_args()

    load_start = loadavg()
    baseline_rss = status_mb("VmRSS:")
    import llama_cpp
    from llama_cpp import Llama

    prompt1 = open(args.prompt, encoding="utf-8").read()
    prompt2_path = args.prompt2 or (args.prompt + ".turn2")
    prompt2 = open(prompt2_path, encoding="utf-8").read() if os.path.exists(prompt2_path) else None
    import_rss = status_mb("VmRSS:")

    t0 = time.perf_counter()
    llm = Llama(
        model_path=args.model,
        n_ctx=args.n_ctx,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        n_batch=512,
        flash_attn=args.flash_attn == "on",
        verbose=False,
    )
    load_ms = (time.perf_counter() - t0) * 1000.0

    bos_text = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", "replace")

    def tokenize(text):
        add_bos = not bos_text or not text.startswith(bos_text)
        return llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=True)

    ctx = llm._ctx.ctx

    def perf():
        try:
            p = llama_cpp.llama_perf_context(ctx)
            return p.t_p_eval_ms, p.n_p_eval, p.t_eval_ms, p.n_eval
        except Exception:  # older/newer bindings without the perf API
            return None

    def turn(tokens, reset):
        """Stream one greedy completion of `tokens`; `reset` drops the cached prefix first."""
        cached = 0
        if reset:
            llm.reset()
        else:
            old = list(llm._input_ids[: llm.n_tokens])
            while cached < min(len(old), len(tokens) - 1) and old[cached] == tokens[cached]:
                cached += 1
        try:
            llama_cpp.llama_perf_context_reset(ctx)
        except Exception:
            pass
        eog = llm._model.token_is_eog if hasattr(llm._model, "token_is_eog") else None
        sent = time.perf_counter()
        first = last = None
        n = 0
        text = b""
        for tok in llm.generate(tokens, temp=0.0, top_k=1, top_p=1.0, min_p=0.0,
                                repeat_penalty=1.0, reset=True):
            now = time.perf_counter()
            if (eog(tok) if eog else tok == llm.token_eos()):
                break
            text += llm.detokenize([tok])
            n += 1
            first = first or now
            last = now
            if n >= args.max_tokens:
                break
        end = time.perf_counter()
        first = first or end
        last = last or end
        ttft = (first - sent) * 1000.0
        stream = (last - first) * 1000.0
        p = perf()
        sample = {
            "promptTokens": len(tokens), "reused": cached, "evaluated": len(tokens) - cached,
            "ttftMs": ttft, "streamMs": stream, "totalMs": (end - sent) * 1000.0, "output": n,
            "prefillTps": (len(tokens) - cached) / (ttft / 1000.0),
            "genTps": (n - 1) / (stream / 1000.0) if n > 1 and stream > 0 else float("nan"),
            "text": text.decode("utf-8", "replace"),
        }
        if p:
            t_p, n_p, t_e, n_e = p
            sample["perf"] = {"promptEvalMs": t_p, "promptEvalTokens": n_p,
                              "evalMs": t_e, "evalTokens": n_e,
                              "promptTps": n_p / (t_p / 1000.0) if t_p > 0 else float("nan"),
                              "evalTps": n_e / (t_e / 1000.0) if t_e > 0 else float("nan")}
        return sample

    # Warm-up, as in the Rust bench (1 token on a short prompt, not counted).
    turn(tokenize("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"), True)

    tokens1 = tokenize(prompt1)
    tokens2 = tokenize(prompt2) if prompt2 is not None else None
    t1s, t2c, t2n = [], [], []
    for run in range(args.runs):
        t1 = turn(tokens1, True)
        t1s.append(t1)
        line = (f"run {run + 1}: turn 1 ttft {t1['ttftMs']:.0f} ms ({t1['promptTokens']} tok, "
                f"prefill {t1['prefillTps']:.0f} tok/s), gen {t1['genTps']:.1f} tok/s "
                f"({t1['output']} tok)")
        if tokens2 is not None:
            c = turn(tokens2, False)
            u = turn(tokens2, True)
            t2c.append(c)
            t2n.append(u)
            line += (f"; turn 2 ttft cached {c['ttftMs']:.1f} ms (reused {c['reused']}) vs "
                     f"uncached {u['ttftMs']:.0f} ms ({u['promptTokens']} tok)")
        print(line, file=sys.stderr)

    peak = status_mb("VmHWM:")
    rss = status_mb("VmRSS:")
    load_end = loadavg()
    med = lambda v, k: median([s[k] for s in v])  # noqa: E731
    perf_med = lambda k: median([s["perf"][k] for s in t1s if "perf" in s])  # noqa: E731
    m = {
        "turn1TtftMs": med(t1s, "ttftMs"), "prefillTps": med(t1s, "prefillTps"),
        "genTps": med(t1s, "genTps"),
        "perfPromptTps": perf_med("promptTps"), "perfEvalTps": perf_med("evalTps"),
        "turn2TtftCachedMs": med(t2c, "ttftMs") if t2c else float("nan"),
        "turn2TtftUncachedMs": med(t2n, "ttftMs") if t2n else float("nan"),
    }
    try:
        system_info = llama_cpp.llama_print_system_info().decode()
    except Exception:
        system_info = "?"

    print(f"llama-cpp-python {llama_cpp.__version__} reference")
    print(f"model          {args.model}")
    print(f"threads        {args.threads}   n_ctx {llm.n_ctx()}   max tokens {args.max_tokens}   "
          f"greedy   flash_attn {args.flash_attn}   runs {args.runs} (medians)")
    print(f"prompt         turn 1 = {len(tokens1)} tokens"
          + (f", turn 2 = {len(tokens2)} tokens" if tokens2 else ""))
    print(f"load average   {load_start} (start), {load_end} (end)")
    print(f"system info    {system_info.strip()}")
    print()
    print("| metric                                      | value      |")
    print("|---------------------------------------------|------------|")
    rows = [
        ("load (model file + context), ms", load_ms),
        ("turn 1 time to first token, ms", m["turn1TtftMs"]),
        ("prefill, tokens/s", m["prefillTps"]),
        ("generation, tokens/s", m["genTps"]),
        ("prefill (llama_perf prompt eval), tokens/s", m["perfPromptTps"]),
        ("generation (llama_perf eval), tokens/s", m["perfEvalTps"]),
        ("turn 2 TTFT with kept KV cache, ms", m["turn2TtftCachedMs"]),
        ("turn 2 TTFT without (full prompt), ms", m["turn2TtftUncachedMs"]),
        ("peak RSS (VmHWM), MB", peak),
        ("RSS at end (VmRSS), MB", rss),
        ("RSS after imports, before load, MB", import_rss),
    ]
    for name, value in rows:
        print(f"| {name:<43} | {value:>10.1f} |")
    print(f"\nPython RSS before importing llama_cpp: {baseline_rss:.1f} MB")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "threads": args.threads, "nCtx": llm.n_ctx(),
                       "maxTokens": args.max_tokens, "runs": args.runs,
                       "flashAttn": args.flash_attn, "loadMs": load_ms,
                       "peakRssMb": peak, "rssMb": rss, "importRssMb": import_rss,
                       "loadavgStart": load_start, "loadavgEnd": load_end,
                       "systemInfo": system_info, "median": m, "turn1": t1s,
                       "turn2Cached": t2c, "turn2Uncached": t2n}, f, indent=2)


if __name__ == "__main__":
    main()
