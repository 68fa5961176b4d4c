"""A partition added in the Dagster UI is not an evaluation: its run stops in `eval_spec` with
one sentence (a Dagster Failure, not retried, no error chain behind it), whether or not the
warehouse exists yet."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from eval_pipelines.definitions import defs
from eval_pipelines.storage.warehouse import connect


def _spec_failure(partition: str) -> dg.DagsterEvent:
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("holdout_evaluations", [partition])
    result = defs.resolve_job_def("holdout_eval").execute_in_process(
        instance=instance, partition_key=partition, raise_on_error=False
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "eval_spec"
    return failure


def test_no_warehouse_yet_is_one_sentence_not_a_chained_error(workdir: Path) -> None:
    data = _spec_failure("added-in-ui-s1").step_failure_data
    assert data.user_failure_data is not None  # a refusal (dg.Failure), not a crash
    assert data.user_failure_data.description.startswith("warehouse ")
    assert "does not exist yet: create a case first" in data.user_failure_data.description
    assert data.error.cause is None and data.error.context is None


def test_an_unregistered_key_says_how_evaluations_are_made(workdir: Path) -> None:
    with connect(workdir / "warehouse.duckdb", create=True):
        pass
    data = _spec_failure("added-in-ui-s2").step_failure_data
    assert data.user_failure_data is not None
    description = data.user_failure_data.description
    assert description.startswith("No holdout evaluation is registered under the key")
    assert "eval-pipelines eval holdout CASE" in description
    assert data.error.cause is None and data.error.context is None
