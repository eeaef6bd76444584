"""A flow run started inside a stage (``run_stage``) is named after the stage's label and
tagged with its stage, dataset, method and variant; outside a stage it keeps Prefect's name."""

from __future__ import annotations

import asyncio
import os

from prefect import flow
from prefect.context import FlowRunContext

from evichain.config import OrchestrationParams
from flows.common import RUN_NAME_ENV, RUN_TAGS_ENV, with_runner
from stages._common import run_stage, stage_tags

THREADS = OrchestrationParams(task_runner="thread", max_workers=1)


@flow
def _report() -> tuple[str, str, list[str]]:
    run = FlowRunContext.get().flow_run
    return str(run.id), run.name, sorted(run.tags)


def _stored(flow_run_id: str) -> tuple[str, list[str]]:
    from prefect.client.orchestration import get_client

    async def read() -> tuple[str, list[str]]:
        async with get_client() as client:
            run = await client.read_flow_run(flow_run_id)
            return run.name, sorted(run.tags)

    return asyncio.run(read())


def test_flow_run_inside_a_stage_is_named_and_tagged(capsys) -> None:
    seen: list[tuple[str, str, list[str]]] = []

    def body() -> dict[str, str]:
        seen.append(with_runner(_report, THREADS)())
        return {}

    run_stage("retrieve_x@demo-full", body, tags={"method": "x", "variant": "full"})
    assert "[retrieve_x@demo-full] done" in capsys.readouterr().out
    (run_id, name, tags), = seen
    expected = ["dataset:demo", "method:x", "stage:retrieve_x", "variant:full"]
    assert (name, tags) == ("retrieve_x@demo-full", expected)
    assert _stored(run_id) == ("retrieve_x@demo-full", expected)  # what the server/UI shows
    assert RUN_NAME_ENV not in os.environ and RUN_TAGS_ENV not in os.environ


def test_tags_read_from_the_stage_label() -> None:
    assert stage_tags("retrieve_evireform@demo-full") == {
        "stage": "retrieve_evireform", "dataset": "demo", "method": "evireform", "variant": "full"}
    assert stage_tags("retrieve@musique-bm25") == {"stage": "retrieve", "dataset": "musique",
                                                   "method": "bm25"}
    assert stage_tags("evaluate@demo-rerank-listwise-qa") == {
        "stage": "evaluate", "dataset": "demo", "kind": "qa", "method": "listwise"}
    assert stage_tags("report") == {"stage": "report"}


def test_flow_run_outside_a_stage_keeps_prefects_name() -> None:
    _, name, tags = with_runner(_report, THREADS)()
    assert "@" not in name and tags == []
