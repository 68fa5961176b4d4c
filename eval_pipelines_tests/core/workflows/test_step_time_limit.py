"""A template regex that backtracks catastrophically cannot hang a run: invoice2data runs in a
worker process with a time limit per step. Python's ``re`` holds the GIL while it matches, so
a hung match in a thread would freeze the whole process (signals, Terminate and every other
thread included); a worker process can be killed.

The pattern is the classic one: ``(a+)+$`` on 40 ``a`` followed by ``!`` tries about 2^40
ways to split the run of ``a`` before it fails, which never finishes in practice."""

from __future__ import annotations

import copy
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.workflows import step_worker
from eval_pipelines.core.workflows.documents import document_from_text
from eval_pipelines.core.workflows.invoice2data_node import Invoice2DataNode
from eval_pipelines.core.workflows.nodes import NodeFailed

NODE = Invoice2DataNode()
PATHOLOGICAL = "(a+)+$"
HANGS = "ACME Supplies Ltd\nInvoice number: INV-7\n" + "a" * 40 + "!\n"
FINE = "ACME Supplies Ltd\nInvoice number: INV-8\naaa\n"
TEMPLATE = {
    "issuer": "ACME Supplies",
    "keywords": ["ACME Supplies Ltd"],
    "required_fields": ["invoice_number"],
    "fields": {"invoice_number": r"Invoice number:\s+(\S+)", "tail": PATHOLOGICAL},
}


def busy_workers() -> list[int]:
    """The pids of the worker processes running a step, once there is one (at most 60 s)."""
    for _ in range(600):
        if pids := step_worker.busy_pids():
            return pids
        time.sleep(0.1)
    raise AssertionError("no worker process started the step")


def prepare(time_limit: Any = 1) -> dict[str, Any]:
    config = {"templates": [copy.deepcopy(TEMPLATE)], "time_limit": time_limit}
    return NODE.prepare(config, "nodes[0]", Path("."))


@pytest.mark.exhaustive
def test_a_catastrophic_regex_fails_its_step_after_the_time_limit_and_the_next_step_runs() -> None:
    config = prepare(time_limit=1)

    with pytest.raises(NodeFailed) as raised:
        NODE.run(config, document_from_text("hangs.txt", HANGS), {})

    assert str(raised.value).startswith("timed out after 1 s")
    # The worker that hung was killed and replaced: the next document is extracted.
    output = NODE.run(config, document_from_text("fine.txt", FINE), {})
    assert (output["invoice_number"], output["tail"]) == ("INV-8", "aaa")


@pytest.mark.parametrize("bad", [0, -1, True, "30", 3601])
def test_a_bad_time_limit_is_refused(bad: Any) -> None:
    with pytest.raises(InputError) as raised:
        prepare(time_limit=bad)

    assert raised.value.field == "nodes[0].time_limit"
    assert raised.value.rule == "seconds per step: a number > 0 and at most 3600"


def test_the_time_limit_is_part_of_the_revision_only_when_given() -> None:
    assert prepare(time_limit=5)["time_limit"] == 5.0
    given = NODE.prepare({"templates": [copy.deepcopy(TEMPLATE)]}, "nodes[0]", Path("."))
    # Omitted: the default applies and revisions saved before the limit existed keep their id.
    assert "time_limit" not in given


def test_a_step_canceled_while_it_hangs_stops_its_worker() -> None:
    config = prepare(time_limit=600)
    stop = threading.Event()
    failures: list[BaseException] = []

    def hang() -> None:
        with step_worker.cancel_on(stop):
            try:
                NODE.run(config, document_from_text("hangs.txt", HANGS), {})
            except BaseException as error:  # noqa: BLE001 - recorded for the assertion
                failures.append(error)

    thread = threading.Thread(target=hang)
    thread.start()
    pids = busy_workers()
    stop.set()
    thread.join()

    assert len(failures) == 1 and isinstance(failures[0], step_worker.StepCanceled)
    assert not isinstance(failures[0], NodeFailed)  # a canceled step is not the document's fault
    for pid in pids:  # killed and reaped: not left spinning
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_a_canceled_steps_worker_stays_busy_until_it_is_dead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whoever waits for no busy worker after a cancel (the golden run's Terminate test does)
    must never find the worker still alive: it counts as busy until killed and reaped. The
    kill is slowed down here so that the order, not the machine's speed, decides."""
    killing = threading.Event()
    drop = step_worker._drop

    def slow_drop(worker: Any) -> None:
        killing.set()
        time.sleep(0.5)
        drop(worker)

    monkeypatch.setattr(step_worker, "_drop", slow_drop)
    config = prepare(time_limit=600)
    stop = threading.Event()
    thread = threading.Thread(
        target=lambda: _run_until_canceled(config, stop),
    )
    thread.start()
    pids = busy_workers()
    stop.set()
    killing.wait()
    while step_worker.busy_pids():
        time.sleep(0.01)
    for pid in pids:  # no longer busy: so already dead and reaped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    thread.join()


def _run_until_canceled(config: dict[str, Any], stop: threading.Event) -> None:
    with step_worker.cancel_on(stop), pytest.raises(step_worker.StepCanceled):
        NODE.run(config, document_from_text("hangs.txt", HANGS), {})
