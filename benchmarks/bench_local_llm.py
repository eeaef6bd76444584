#!/usr/bin/env python
"""Measure the offline local LLM through litellm (the way the pipeline calls it).

Starts :class:`evichain.llm.local_server.LocalLLMServer` for a model key, then sends
through ``litellm.completion(model="openai/<alias>", api_base=..., api_key="none",
response_format={"type": "json_object", "schema": ...})``:

(a) a proposition-extraction prompt for a ~70-word passage,
    schema ``{"propositions": [{"text": str, "entities": [str]}]}``;
(b) a short QA prompt over two passages, schema ``{"answer": str}``;
(c) once, OpenAI's ``{"type": "json_schema", ...}`` form, to record whether the
    server accepts it (llama-cpp-python 0.3.36 does not).

Prints prompt/completion tokens, seconds, tokens/s, the server's own prompt-eval and
generation rates (parsed from its log), schema validity, and the server RSS.

    .venv/bin/python -m benchmarks.bench_local_llm --model qwen2.5-coder-1.5b --repeats 3
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch

import jsonschema
import litellm

from evichain.llm.local_model import get_spec
from evichain.llm.local_server import LocalLLMServer

litellm.telemetry = False
litellm.suppress_debug_info = True

PASSAGE = (
    "The Eiffel Tower, completed in 1889 for the Exposition Universelle in Paris, was designed "
    "by the engineering firm of Gustave Eiffel. Maurice Koechlin and Emile Nouguier drew the "
    "first sketches, and architect Stephen Sauvestre refined the design. At 300 metres it was "
    "the tallest man-made structure in the world until the Chrysler Building in New York was "
    "finished in 1930. Today it receives about seven million visitors a year."
)

PROPOSITION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "propositions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "entities": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["text", "entities"],
            },
        }
    },
    "required": ["propositions"],
}

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}

EXTRACT_MESSAGES = [
    {
        "role": "system",
        "content": (
            "You split passages into atomic propositions. Each proposition is one short, "
            "self-contained factual sentence (resolve pronouns), with the list of named "
            "entities it mentions. Answer only with JSON of the form "
            '{"propositions": [{"text": "...", "entities": ["..."]}]}.'
        ),
    },
    {"role": "user", "content": f"Passage:\n{PASSAGE}"},
]

QA_MESSAGES = [
    {
        "role": "system",
        "content": (
            "Answer the question using only the passages. Give a short answer span. "
            'Answer only with JSON: {"answer": "..."}.'
        ),
    },
    {
        "role": "user",
        "content": (
            "Passage 1: The Eiffel Tower was designed by the engineering firm of Gustave Eiffel "
            "and completed in 1889.\n"
            "Passage 2: Gustave Eiffel was born in Dijon, France, in 1832.\n"
            "Question: In which city was the designer of the Eiffel Tower's firm founder born?"
        ),
    },
]

_PERF_PROMPT = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_PERF_EVAL = re.compile(r"\s eval time =\s*([\d.]+) ms /\s*(\d+) runs")
_PERF_TOTAL = re.compile(r"total time =\s*([\d.]+) ms")


def _rss_mib(pid: int | None) -> tuple[float | None, float | None]:
    """(VmRSS, VmHWM) of ``pid`` in MiB from /proc (None off Linux)."""
    if pid is None:
        return None, None
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None, None
    vals = {}
    for key in ("VmRSS", "VmHWM"):
        m = re.search(rf"{key}:\s+(\d+) kB", text)
        vals[key] = int(m.group(1)) / 1024 if m else None
    return vals["VmRSS"], vals["VmHWM"]


def cpu_busy(interval: float = 1.0) -> float | None:
    """Fraction of all CPUs busy over ``interval`` s (from /proc/stat), None off Linux.

    Sampled just before each call (our server is idle then), so it shows how
    much other work competes with the measurement on a shared machine.
    """

    def snap() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return idle, sum(fields)

    try:
        i0, t0 = snap()
        time.sleep(interval)
        i1, t1 = snap()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def _wait_idle(max_wait: float, threshold: float = 0.25) -> float | None:
    """Wait up to ``max_wait`` s until other processes use < ``threshold`` of the CPUs."""
    deadline = time.monotonic() + max_wait
    busy = cpu_busy()
    while busy is not None and busy >= threshold and time.monotonic() < deadline:
        busy = cpu_busy()
    return busy


def _server_perf(server: LocalLLMServer) -> dict[str, float]:
    """Last prompt-eval / eval timings the server printed (llama_perf_context_print).

    llama.cpp sometimes reports a near-zero prompt eval time for the first
    request; then the prompt time is taken as ``total - eval`` instead.
    """
    log = server.log_tail(200)
    out: dict[str, float] = {}
    prompts = _PERF_PROMPT.findall(log)
    evals = _PERF_EVAL.findall(log)
    totals = _PERF_TOTAL.findall(log)
    if prompts:
        ms, n = float(prompts[-1][0]), int(prompts[-1][1])
        if n and ms / n < 0.5 and evals and totals:  # implausible (< 0.5 ms/token)
            ms = float(totals[-1]) - float(evals[-1][0])
        out["server_prompt_tokens"] = n
        out["server_prompt_tok_s"] = n / (ms / 1000) if ms > 0 else 0.0
    if evals:
        ms, n = float(evals[-1][0]), int(evals[-1][1])
        out["server_gen_tokens"] = n
        out["server_gen_tok_s"] = n / (ms / 1000) if ms > 0 else 0.0
    return out


def _call(
    server: LocalLLMServer,
    name: str,
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    max_tokens: int,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    resp = litellm.completion(
        model=f"openai/{server.model_alias}",
        api_base=server.api_base,
        api_key="none",
        messages=messages,
        temperature=0,
        max_tokens=max_tokens,
        response_format={"type": "json_object", "schema": schema},
        timeout=600,
    )
    dt = time.perf_counter() - t0
    content = resp.choices[0].message.content or ""
    finish = resp.choices[0].finish_reason
    usage = resp.usage
    valid, error = True, ""
    try:
        jsonschema.validate(json.loads(content), schema)
    except (ValueError, jsonschema.ValidationError) as exc:
        valid, error = False, str(exc).splitlines()[0][:200]
    row: dict[str, Any] = {
        "task": name,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "seconds": round(dt, 2),
        "completion_tok_s": round(usage.completion_tokens / dt, 1),
        "finish_reason": finish,
        "schema_valid": valid,
        "error": error,
        "content": content,
        "loadavg_1m_after": round(os.getloadavg()[0], 2),
    }
    row.update({k: round(v, 1) for k, v in _server_perf(server).items()})
    return row


def _check_schema_enforced(server: LocalLLMServer) -> str:
    """Prove the schema (not just "JSON mode") reaches the grammar.

    The prompt asks for ``{"answer": ...}`` but the schema demands a different
    key and an integer; only a grammar built from the schema produces it.
    """
    schema = {
        "type": "object",
        "properties": {"zz_birth_year": {"type": "integer"}},
        "required": ["zz_birth_year"],
    }
    resp = litellm.completion(
        model=f"openai/{server.model_alias}", api_base=server.api_base, api_key="none",
        messages=QA_MESSAGES, temperature=0, max_tokens=32,
        response_format={"type": "json_object", "schema": schema},
    )
    content = resp.choices[0].message.content or ""
    try:
        jsonschema.validate(json.loads(content), schema)
        return f"yes: {content.strip()!r}"
    except (ValueError, jsonschema.ValidationError):
        return f"NO: {content.strip()!r}"


def _try_json_schema_type(server: LocalLLMServer) -> str:
    """Send OpenAI's json_schema response_format once; report what happens."""
    try:
        resp = litellm.completion(
            model=f"openai/{server.model_alias}",
            api_base=server.api_base,
            api_key="none",
            messages=QA_MESSAGES,
            temperature=0,
            max_tokens=32,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True},
            },
            num_retries=0,
            timeout=120,
        )
        return f"accepted: {resp.choices[0].message.content!r}"
    except Exception as exc:  # noqa: BLE001 - we want to record whatever happens
        return f"rejected: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="registry key or short name")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="calls per task")
    parser.add_argument("--extract-max-tokens", type=int, default=512)
    parser.add_argument("--qa-max-tokens", type=int, default=64)
    parser.add_argument("--logits-all", action="store_true", help="server default (slower)")
    parser.add_argument("--wait-idle", type=float, default=0.0,
                        help="before each call wait up to this many s for the CPUs to be idle")
    parser.add_argument("--no-warmup", action="store_true", help="skip the server's warm-up call")
    parser.add_argument("--skip-json-schema-check", action="store_true")
    parser.add_argument("--json-out", type=Path, default=None, help="write all rows as JSON")
    parser.add_argument("--show", action="store_true", help="print model outputs")
    args = parser.parse_args(argv)

    spec = get_spec(args.model)
    print(f"# model {spec.key} ({spec.size:,} B), n_ctx={args.n_ctx}, "
          f"threads={args.threads or os.cpu_count()}, logits_all={args.logits_all}")
    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, "
          f"python {platform.python_version()}, litellm {importlib.metadata.version('litellm')}")
    server = LocalLLMServer(spec.key, n_ctx=args.n_ctx, n_threads=args.threads,
                            logits_all=args.logits_all, keep_log=True,
                            warmup=not args.no_warmup)
    rows: list[dict[str, Any]] = []
    with server:
        print(f"# server up in {server.startup_seconds:.1f}s at {server.api_base} "
              f"(pid {server.pid}), alias {server.model_alias}, warm-up "
              f"{'skipped' if server.warmup_seconds is None else f'{server.warmup_seconds:.1f}s'}")
        for i in range(args.repeats):
            for name, msgs, schema, mt in (
                ("extract", EXTRACT_MESSAGES, PROPOSITION_SCHEMA, args.extract_max_tokens),
                ("qa", QA_MESSAGES, ANSWER_SCHEMA, args.qa_max_tokens),
            ):
                busy = _wait_idle(args.wait_idle) if args.wait_idle > 0 else cpu_busy(0.5)
                row = _call(server, name, msgs, schema, mt)
                row["run"] = i
                row["other_cpu_busy_before"] = None if busy is None else round(busy, 2)
                rows.append(row)
                print(f"{name:8s} run {i}: prompt {row['prompt_tokens']:4d} tok, completion "
                      f"{row['completion_tokens']:4d} tok, {row['seconds']:6.2f}s, "
                      f"{row['completion_tok_s']:5.1f} completion tok/s overall | server: prompt "
                      f"{row.get('server_prompt_tokens', '?')} tok @ {row.get('server_prompt_tok_s', '?')} tok/s, "
                      f"gen {row.get('server_gen_tok_s', '?')} tok/s | finish={row['finish_reason']} "
                      f"schema_valid={row['schema_valid']} | others busy {row['other_cpu_busy_before']} "
                      f"{row['error']}")
                if args.show or i == 0:
                    print(f"    -> {row['content'][:600]}")
        rss, hwm = _rss_mib(server.pid)
        print(f"# server RSS {rss:.0f} MiB, peak {hwm:.0f} MiB" if rss else "# RSS n/a")
        enforced = _check_schema_enforced(server)
        print(f"# schema enforced (prompt asks for 'answer', schema demands int 'zz_birth_year'): {enforced}")
        js = "skipped" if args.skip_json_schema_check else _try_json_schema_type(server)
        print(f"# response_format type=json_schema: {js}")
        print(f"# server log: {server._active_log}")
    if args.json_out:
        args.json_out.write_text(json.dumps(
            {"model": spec.key, "n_ctx": args.n_ctx, "rows": rows, "rss_mib": rss,
             "peak_rss_mib": hwm, "json_schema_type": js, "schema_enforced": enforced,
             "startup_s": server.startup_seconds, "warmup_s": server.warmup_seconds,
             "threads": server.n_threads}, indent=2))
    ok = all(r["schema_valid"] for r in rows) and enforced.startswith("yes")
    print(f"# all outputs schema-valid: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
