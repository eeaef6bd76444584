#!/usr/bin/env python
"""The LLM client against a hosted-style endpoint: wall time vs calls × latency / concurrency
(issue 62, item 1, last bullet).

For each concurrency ``c`` the script sends distinct reader calls (``evichain.qa.prompts.READER``
on synthetic evidence) through :meth:`LLMClient.map` with ``llm.model: openai/fake``,
``llm.api_base`` an :class:`~evichain.llm.fake_endpoint.FakeEndpoint` on 127.0.0.1 that answers
after a simulated latency, and a fresh empty cache, so every call reaches the endpoint. Passes:

* ``faults off``: every request answered after ``latency ± jitter``;
* ``faults on``: the endpoint also answers a share of requests 429 (with ``Retry-After``),
  500/503, or holds them past the client's ``timeout_s`` (a timeout);
* ``overhead``: latency 0, no faults: the calls/s the client and endpoint manage on this
  machine (litellm, HTTP, JSON, cache writes; one Python process), i.e. the ceiling that any
  ``c / latency`` must stay under;
* ``502 probe`` (one concurrency): only 502 Bad Gateway faults. ``faults on`` answers its 5xx
  with 500/503, which the client retries; litellm maps a 502 to ``BadGatewayError``, which the
  client's ``_RETRYABLE`` (evichain/llm/client.py) lacks, so a 502 fails the call at once. The
  probe measures that (lost calls) until the client retries 502.

Per cell: wall time; the ideal ``calls × latency / c``; a fault-aware lower bound (the larger
of the summed per-call busy time over ``c`` and the longest single call, where a call's busy
time is the endpoint's time on its attempts, ``timeout_s`` per timeout and the client's
shortest backoff per retry); process CPU seconds (client + endpoint threads) and the
endpoint's share; the client's usage (calls, retries, failures); lost calls (no success);
wrong answers (an answer for another question); duplicated answers and re-sends after an
answer (from the endpoint's records); retries sooner than a 429's ``Retry-After``; the most
requests answered at once (must not exceed ``c``). Results:
``benchmarks/results/hosted_scaling.{json,md,png}``.

    .venv/bin/python -m benchmarks.bench_hosted_scaling            # ~3 min on 2 cores
    .venv/bin/python -m benchmarks.bench_hosted_scaling --calls 64 --concurrency 8
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import matplotlib
import typer

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402 (after the backend is chosen)
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

from evichain.llm.cache import LLMCache  # noqa: E402
from evichain.llm.client import LLMClient  # noqa: E402
from evichain.llm.fake_endpoint import (  # noqa: E402
    EndpointFaults,
    EndpointStats,
    FakeEndpoint,
    RequestRecord,
    digest_answer,
    unit_draw,
)
from evichain.llm.params import LLMParams  # noqa: E402
from evichain.llm.types import LLMSuccess  # noqa: E402
from evichain.qa.prompts import READER  # noqa: E402

KEY_ENV = "EVICHAIN_FAKE_ENDPOINT_KEY"
MODEL = "openai/fake"
PASSES = ("faults off", "faults on", "overhead", "502 probe")
VOCAB = ("river", "castle", "composer", "treaty", "island", "album", "founded", "province",
         "married", "station", "league", "novel", "bridge", "governor", "century", "director")

app = typer.Typer(add_completion=False, help=__doc__)


@dataclass(frozen=True)
class Cell:
    """One measurement: ``calls`` distinct reader calls at ``concurrency`` against an endpoint
    with ``latency_s ± jitter_s`` and ``faults``."""

    name: str
    concurrency: int
    calls: int
    latency_s: float
    jitter_s: float
    faults: EndpointFaults


@dataclass(frozen=True)
class Client:
    """The client settings of every cell (``llm`` params not named here keep their defaults)."""

    timeout_s: float
    passages: int
    words: int
    seed: int

    def params(self, api_base: str, concurrency: int) -> LLMParams:
        """``LLMParams`` for the fake endpoint: default retries and backoff, short timeout."""
        return LLMParams(model=MODEL, api_base=api_base, api_key_env=KEY_ENV,
                         timeout_s=self.timeout_s, concurrency=concurrency)


def evidence_text(seed: int, tag: str, n_words: int) -> str:
    """``n_words`` words drawn from :data:`VOCAB` by the hash RNG (synthetic passage text)."""
    return " ".join(VOCAB[int(unit_draw(seed, tag, k) * len(VOCAB))] for k in range(n_words))


def reader_items(cell: Cell, client: Client) -> list[dict[str, Any]]:
    """Distinct READER variables for ``cell``: question i with ``client.passages`` passages of
    ``client.words`` words, the shape :func:`evichain.qa.reader.read_one` sends."""
    items = []
    for i in range(cell.calls):
        tag = f"{cell.name}/c{cell.concurrency}/{i}"
        evidence = [{"title": f"Passage {tag}/{p}", "text": evidence_text(client.seed, f"{tag}/{p}",
                                                                           client.words)}
                    for p in range(client.passages)]
        items.append({"payload": {"question": f"Question {tag}: which treaty founded the province?",
                                  "evidence": evidence}})
    return items


def min_backoff(params: LLMParams, retry: int) -> float:
    """The client's shortest backoff before retry number ``retry`` (1-based):
    ``0.5 × min(backoff_max_s, backoff_base_s × 2^(retry-1))`` (``LLMClient._backoff``)."""
    return 0.5 * min(params.backoff_max_s, params.backoff_base_s * 2 ** (retry - 1))


def fault_aware_bound(records: list[RequestRecord], params: LLMParams, concurrency: int) -> float:
    """Lower bound on the wall time given what the endpoint did: max(Σ busy / c, max busy),
    where a request id's busy time sums its attempts' endpoint time (``timeout_s`` for a
    timeout: the client waited that long) and the shortest backoff before each retry; a
    backing-off call keeps its ``map`` worker, so busy time is worker time."""
    busy: dict[str, float] = {}
    for r in records:
        spent = params.timeout_s if r.outcome == "timeout" else r.finished_s - r.arrived_s
        wait = min_backoff(params, r.attempt) if r.attempt else 0.0
        busy[r.request_id] = busy.get(r.request_id, 0.0) + spent + wait
    if not busy:
        return 0.0
    return max(sum(busy.values()) / concurrency, max(busy.values()))


def longest_call(records: list[RequestRecord], timeout_s: float) -> float:
    """The longest span, first arrival to last reply, of one request id as the client saw it
    (a timeout ends for the client ``timeout_s`` after it arrived)."""
    spans: dict[str, tuple[float, float]] = {}
    for r in records:
        end = r.arrived_s + timeout_s if r.outcome == "timeout" else r.finished_s
        first, last = spans.get(r.request_id, (r.arrived_s, end))
        spans[r.request_id] = (min(first, r.arrived_s), max(last, end))
    return max((last - first for first, last in spans.values()), default=0.0)


def run_cell(cell: Cell, client: Client, cache_dir: Path) -> dict[str, Any]:
    """Run ``cell`` against a fresh endpoint and cache; its measurements (module docstring)."""
    items = reader_items(cell, client)
    expected = [json.loads(digest_answer(READER.messages(**it)))["answer"] for it in items]
    with FakeEndpoint(latency_s=cell.latency_s, jitter_s=cell.jitter_s, faults=cell.faults,
                      seed=client.seed) as endpoint:
        params = client.params(endpoint.api_base, cell.concurrency)
        llm = LLMClient(params, stage="bench", cache=LLMCache(
            cache_dir / f"{cell.name.replace(' ', '-')}-c{cell.concurrency}.sqlite"))
        cpu0, t0 = time.process_time(), time.perf_counter()
        results = llm.map(READER, items)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        stats, records = endpoint.stats(), endpoint.records()
    answers = [r.value.answer if isinstance(r, LLMSuccess) else None for r in results]
    lost = sum(a is None for a in answers)
    wrong = sum(a is not None and a != e for a, e in zip(answers, expected))
    ideal = cell.calls * cell.latency_s / cell.concurrency
    bound = fault_aware_bound(records, params, cell.concurrency)
    usage = llm.usage
    return {
        "pass": cell.name, "concurrency": cell.concurrency, "calls": cell.calls,
        "latency_s": cell.latency_s, "jitter_s": cell.jitter_s,
        "wall_s": round(wall, 3), "ideal_s": round(ideal, 3), "bound_s": round(bound, 3),
        "longest_call_s": round(longest_call(records, params.timeout_s), 3),
        "wall_over_ideal": round(wall / ideal, 3) if ideal else None,
        "wall_over_bound": round(wall / bound, 3) if bound else None,
        "calls_per_s": round(cell.calls / wall, 2),
        "ideal_calls_per_s": round(cell.concurrency / cell.latency_s, 2) if cell.latency_s else None,
        "cpu_s": round(cpu, 3), "endpoint_cpu_s": stats.server_cpu_s,
        "client_cpu_ms_per_call": round(1000 * (cpu - stats.server_cpu_s) / cell.calls, 2),
        "lost": lost, "wrong_answers": wrong,
        "client": usage.as_dict(),
        "endpoint": stats.as_dict(),
        "checks": checks(cell, stats, usage.as_dict(), lost, wrong),
    }


def checks(cell: Cell, stats: EndpointStats, usage: dict[str, float | int], lost: int,
           wrong: int) -> dict[str, bool]:
    """The invariants a cell must meet: nothing lost, duplicated or mixed up; every endpoint
    request accounted for by the client (one per success, one per counted retry); the
    concurrency bound held."""
    faults = stats.rate_limited + stats.server_errors + stats.timeouts + stats.undelivered
    return {
        "no_lost": lost == 0,
        "no_wrong_answers": wrong == 0,
        "no_duplicates": stats.duplicated == 0 and stats.resent_after_answer == 0,
        "one_answer_per_call": stats.answered == cell.calls == stats.distinct,
        "client_calls_match": usage["calls"] == stats.answered,
        "client_retries_match": usage["retries"] == faults,
        "bound_held": stats.max_in_flight <= cell.concurrency,
    }


def cells(concurrency: list[int], calls: int, calls_c1: int, overhead_calls: int, latency: float,
          jitter: float, faults: EndpointFaults, probe: Cell | None) -> list[Cell]:
    """The first three passes (:data:`PASSES`) over ``concurrency`` (``calls_c1`` calls at
    c = 1, ``overhead_calls`` in the overhead pass), then the 502 probe cell when given."""
    out = []
    for name in PASSES[:3]:
        for c in concurrency:
            n = overhead_calls if name == "overhead" else calls_c1 if c == 1 else calls
            lat, jit = (0.0, 0.0) if name == "overhead" else (latency, jitter)
            out.append(Cell(name, c, n, lat, jit, faults if name == "faults on" else EndpointFaults()))
    return out + ([probe] if probe else [])


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "utc": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus_usable": len(os.sched_getaffinity(0)), "python": platform.python_version(),
        "litellm": _version("litellm"),
        "openai": _version("openai"), "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    """Two panels: calls/s against concurrency (measured with faults off and on, the ideal
    c / latency, the overhead pass's ceiling), and wall / ideal per concurrency."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    off = [r for r in rows if r["pass"] == "faults off"]
    on = [r for r in rows if r["pass"] == "faults on"]
    over = [r for r in rows if r["pass"] == "overhead"]
    cs = [r["concurrency"] for r in off]
    left.plot(cs, [r["ideal_calls_per_s"] for r in off], "k--", label="ideal c / latency")
    left.plot(cs, [r["calls_per_s"] for r in off], "o-", label="faults off")
    left.plot([r["concurrency"] for r in on], [r["calls_per_s"] for r in on], "s-", label="faults on")
    if over:
        ceiling = max(r["calls_per_s"] for r in over)
        left.axhline(ceiling, color="grey", lw=1, label=f"latency 0 ceiling ({ceiling:.0f}/s)")
    left.set(xscale="log", yscale="log", xlabel="concurrency c", ylabel="calls / s",
             title=f"Throughput (simulated latency {off[0]['latency_s']} s)")
    left.xaxis.set_minor_locator(NullLocator())
    left.set_xticks(cs, [str(c) for c in cs])
    left.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    left.yaxis.set_minor_locator(NullLocator())
    left.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    left.legend(fontsize=8)
    width = 0.38
    xs = range(len(cs))
    right.bar([x - width / 2 for x in xs], [r["wall_over_ideal"] for r in off], width, label="faults off")
    right.bar([x + width / 2 for x in xs], [r["wall_over_ideal"] for r in on], width, label="faults on")
    right.axhline(1.0, color="k", ls="--", lw=1)
    right.set_xticks(list(xs), [str(c) for c in cs])
    right.set(xlabel="concurrency c", ylabel="wall / (calls × latency / c)", title="Wall over ideal")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    """The results page: setup, one table per pass, the checks, and what the numbers say."""
    s = meta["setup"]
    m = meta["machine"]
    lines = [
        "# The LLM client against a hosted-style endpoint (issue 62, item 1)",
        "",
        "Generated by `.venv/bin/python -m benchmarks.bench_hosted_scaling` "
        f"({m['utc']}); figure `hosted_scaling.png`, data `hosted_scaling.json`.",
        "",
        f"- Machine: {m['platform']}, {m['cpus_usable']} usable CPU cores, Python {m['python']}, "
        f"litellm {m['litellm']}, openai {m['openai']}; load average (1, 5, 15 min) "
        f"{m['loadavg_before']} before and {m['loadavg_after']} after the run."
        + (f" {meta['note']}" if meta["note"] else ""),
        f"- **The latency is simulated**: `FakeEndpoint` (evichain/llm/fake_endpoint.py) on 127.0.0.1 "
        f"answers each request after {s['latency_s']} ± {s['jitter_s']} s (uniform). The client "
        "and the endpoint run in one Python process; the CPU columns count both, and the endpoint's "
        "share separately.",
        f"- Calls: distinct `READER` (Listing 4) calls, {s['passages']} synthetic passages of "
        f"{s['words']} words each, through `LLMClient.map` with `model: {MODEL}`, a fresh empty "
        f"cache per cell; {s['calls']} calls per cell, {s['calls_c1']} at c = 1 (to keep the "
        f"run short), {s['overhead_calls']} per overhead cell; one unrecorded warm-up cell first.",
        f"- Client: `timeout_s` {s['timeout_s']}, `max_retries` {s['max_retries']}, backoff "
        f"{s['backoff_base_s']} s doubling, capped at {s['backoff_max_s']} s, × U(0.5, 1).",
        f"- Faults on: {s['faults']['rate_limit']:.0%} 429 (Retry-After {s['faults']['retry_after_s']} s), "
        f"{s['faults']['server_error']:.0%} 5xx ({'/'.join(map(str, s['faults']['server_statuses']))}), "
        f"{s['faults']['timeout']:.0%} timeouts (held {s['faults']['hold_s']} s), drawn per "
        f"(request, attempt) with seed {s['faults']['seed']}.",
        f"- 502 probe: {s['probe']}.",
        "- ideal = calls × latency / c. bound = fault-aware lower bound: max(Σ busy / c, longest "
        "busy), busy = endpoint time of a call's attempts + `timeout_s` per timeout + the "
        "shortest backoff per retry.",
        "",
    ]
    for name in PASSES:
        lines += _table(name, [r for r in rows if r["pass"] == name])
    lines += _checks(rows) + _reading(rows)
    return "\n".join(lines) + "\n"


def _table(name: str, rows: list[dict[str, Any]]) -> list[str]:
    head = ("| c | calls | ideal s | bound s | wall s | wall/ideal | wall/bound | longest call s | calls/s "
            "| requests | "
            "429 | 5xx | timeouts | retries | failures | lost | dup | early retries | max in flight "
            "| CPU s (endpoint) | client CPU ms/call |")
    out = [f"## {name}", "", head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        e, u = r["endpoint"], r["client"]
        out.append(
            f"| {r['concurrency']} | {r['calls']} | {r['ideal_s']} | {r['bound_s']} | {r['wall_s']} | "
            f"{r['wall_over_ideal']} | {r['wall_over_bound']} | {r['longest_call_s']} | "
            f"{r['calls_per_s']} | {e['requests']} | "
            f"{e['rate_limited']} | {e['server_errors']} | {e['timeouts']} | {u['retries']} | "
            f"{u['failures']} | {r['lost']} | {e['duplicated']} | {e['early_retries']} | "
            f"{e['max_in_flight']} | {r['cpu_s']} ({e['server_cpu_s']}) | {r['client_cpu_ms_per_call']} |")
    return out + [""]


def _checks(all_rows: list[dict[str, Any]]) -> list[str]:
    """The checks over the scaling passes (the 502 probe is read separately)."""
    rows = [r for r in all_rows if r["pass"] != "502 probe"]
    failed = [f"{r['pass']} c={r['concurrency']}: {k}" for r in rows for k, ok in r["checks"].items()
              if not ok]
    total = sum(r["calls"] for r in rows)
    lost = sum(r["lost"] for r in rows)
    dup = sum(r["endpoint"]["duplicated"] for r in rows)
    verdict = ("every check held" if not failed else "FAILED: " + "; ".join(failed))
    return ["## Checks", "",
            f"Scaling passes: {total} calls in {len(rows)} cells: {lost} lost, {dup} duplicated answers, "
            f"{sum(r['wrong_answers'] for r in rows)} answers to the wrong question; {verdict} "
            "(per cell: no loss, no wrong or duplicated answer, no re-send after an answer, one "
            "answered request per call, the client's calls and retries equal the endpoint's "
            "answers and faults, the most requests answered at once ≤ c).", ""]


def _reading(rows: list[dict[str, Any]]) -> list[str]:
    """Sentences computed from the rows: the ceiling, and where the client's overhead shows."""
    over = [r for r in rows if r["pass"] == "overhead"]
    off = {r["concurrency"]: r for r in rows if r["pass"] == "faults off"}
    on = {r["concurrency"]: r for r in rows if r["pass"] == "faults on"}
    out = ["## Reading", ""]
    ceiling = max((r["calls_per_s"] for r in over), default=None)
    if over:
        best = max(over, key=lambda r: r["calls_per_s"])
        out.append(f"- Ceiling (latency 0): at most {best['calls_per_s']} calls/s (c = "
                   f"{best['concurrency']}), {best['client_cpu_ms_per_call']} ms of client CPU per "
                   "call (litellm, HTTP, JSON, cache): the client's own overhead. Any c / latency "
                   "above it cannot be reached on this machine.")
    for r in (r for r in rows if r["pass"] == "502 probe"):
        out.append(f"- 502 probe (c = {r['concurrency']}): {r['endpoint']['server_errors']} 502s, "
                   f"{r['client']['retries']} retries, {r['lost']} of {r['calls']} calls lost. "
                   + ("A 502 fails the call at once: litellm raises BadGatewayError, which "
                      "`_RETRYABLE` in evichain/llm/client.py does not list." if r["lost"] else
                      "Every 502 was retried."))
    if on:
        early = sum(r["endpoint"]["early_retries"] for r in on.values())
        limited = sum(r["endpoint"]["rate_limited"] for r in on.values())
        out.append(f"- Faults on: {early} of {limited} retries after a 429 came sooner than its "
                   "Retry-After: the client waits its own backoff (`backoff_base_s` doubling, × "
                   "U(0.5, 1)) and does not read Retry-After. A call that backs off keeps its `map` "
                   "worker (the pool has c workers), so backoffs and timeouts lengthen the tail.")
    for c, r in off.items():
        bound_by_client = ceiling is not None and r["ideal_calls_per_s"] > ceiling
        out.append(f"- c = {c}: faults off {r['wall_s']} s vs ideal {r['ideal_s']} s "
                   f"(×{r['wall_over_ideal']}; {r['calls_per_s']} of the ideal "
                   f"{r['ideal_calls_per_s']} calls/s; at most {r['endpoint']['max_in_flight']} of "
                   f"{c} requests in flight; client CPU {r['client_cpu_ms_per_call']} ms/call)"
                   + (": the ideal lies above the ceiling, so the client's own overhead sets the "
                      "wall time" if bound_by_client else "")
                   + (f". Faults on: {on[c]['wall_s']} s, ×{on[c]['wall_over_bound']} of its "
                      f"fault-aware bound {on[c]['bound_s']} s; longest call {on[c]['longest_call_s']} s, "
                      f"{on[c]['client']['retries']} retries" if c in on else "") + ".")
    return out + [""]


@app.command()
def main(
    concurrency: list[int] = typer.Option([1, 8, 32, 64], help="concurrency levels c"),
    calls: int = typer.Option(256, help="distinct calls per cell"),
    calls_c1: int = typer.Option(64, help="calls per cell at c = 1 (latency-bound: keeps it short)"),
    overhead_calls: int = typer.Option(128, help="calls per cell of the latency-0 overhead pass"),
    latency: float = typer.Option(0.5, help="simulated latency per answer, seconds"),
    jitter: float = typer.Option(0.1, help="uniform jitter ± seconds around the latency"),
    timeout_s: float = typer.Option(2.0, help="the client's llm.timeout_s"),
    rate_limit: float = typer.Option(0.05, help="faults on: share of requests answered 429"),
    server_error: float = typer.Option(0.05, help="faults on: share answered 5xx"),
    server_statuses: list[int] = typer.Option([500, 503], help="faults on: the 5xx codes"),
    probe_502: float = typer.Option(0.05, help="502 probe: share answered 502 (0: no probe)"),
    probe_concurrency: int = typer.Option(8, help="502 probe: concurrency"),
    probe_calls: int = typer.Option(128, help="502 probe: calls"),
    timeout_rate: float = typer.Option(0.02, help="faults on: share held past timeout_s"),
    retry_after: float = typer.Option(1.0, help="the 429s' Retry-After, seconds"),
    passages: int = typer.Option(5, help="evidence passages per reader call"),
    words: int = typer.Option(80, help="words per passage"),
    warmup: int = typer.Option(16, help="calls of the unrecorded warm-up cell"),
    seed: int = typer.Option(0, help="seed of the endpoint's latency and fault draws"),
    note: str = typer.Option("", help="a sentence on the machine's state, printed in the page"),
    out: Path = typer.Option(Path("benchmarks/results"), help="results folder"),
) -> None:
    """Run the three passes over ``concurrency`` and write hosted_scaling.{json,md,png}."""
    if latency + jitter >= timeout_s:
        raise typer.BadParameter(f"latency + jitter ({latency + jitter} s) must stay under "
                                 f"timeout_s ({timeout_s} s): only injected timeouts may time out")
    os.environ.setdefault(KEY_ENV, "fake-key")
    faults = EndpointFaults(rate_limit=rate_limit, server_error=server_error, timeout=timeout_rate,
                            retry_after_s=retry_after, hold_s=2 * timeout_s,
                            server_statuses=tuple(server_statuses), seed=seed)
    probe = (Cell("502 probe", probe_concurrency, probe_calls, latency, jitter,
                  EndpointFaults(server_error=probe_502, server_statuses=(502,), seed=seed))
             if probe_502 > 0 else None)
    client = Client(timeout_s=timeout_s, passages=passages, words=words, seed=seed)
    defaults = LLMParams()
    meta: dict[str, Any] = {"machine": machine(), "note": note, "setup": {
        "latency_s": latency, "jitter_s": jitter, "timeout_s": timeout_s, "calls": calls,
        "calls_c1": calls_c1, "overhead_calls": overhead_calls, "passages": passages, "words": words,
        "warmup_calls": warmup,
        "max_retries": defaults.max_retries, "backoff_base_s": defaults.backoff_base_s,
        "backoff_max_s": defaults.backoff_max_s, "faults": asdict(faults),
        "probe": (f"{probe_502:.0%} of requests answered 502, nothing else, {probe_calls} calls at "
                  f"c = {probe_concurrency}" if probe else "not run")}}
    rows = []
    with tempfile.TemporaryDirectory(prefix="hosted-scaling-") as tmp:
        run_cell(Cell("warm-up", max(concurrency), warmup, 0.0, 0.0, EndpointFaults()), client, Path(tmp))
        for cell in cells(concurrency, calls, calls_c1, overhead_calls, latency, jitter, faults, probe):
            row = run_cell(cell, client, Path(tmp))
            rows.append(row)
            print(f"{cell.name:10s} c={cell.concurrency:3d} calls={cell.calls:4d} wall={row['wall_s']:8.2f}s "
                  f"ideal={row['ideal_s']:7.2f}s bound={row['bound_s']:7.2f}s lost={row['lost']} "
                  f"dup={row['endpoint']['duplicated']} checks={all(row['checks'].values())}", flush=True)
    meta["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    out.mkdir(parents=True, exist_ok=True)
    (out / "hosted_scaling.json").write_text(json.dumps({**meta, "cells": rows}, indent=1) + "\n")
    (out / "hosted_scaling.md").write_text(markdown(meta, rows))
    figure(rows, out / "hosted_scaling.png")
    print(f"wrote {out}/hosted_scaling.{{json,md,png}}")


if __name__ == "__main__":
    app()
