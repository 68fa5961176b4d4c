"""Evaluate queries (spec 003) through the Python API, end to end: a real DuckDB warehouse, real
Dagster runs of job ``evaluate_query_job`` in the test's instance, and the engine called
directly on the same data as the oracle (the API must add nothing to, and lose nothing of,
what the engine answers).

The demo table ``products`` (built by :func:`write_products`) has 100 rows: four categories in
turn (row i has category i mod 4); a name that carries its category's word, except on the rows
i = 5 mod 20, which carry the next category's (a quarter of the test rows of fold 0 of 5); three
stores, five weeks, and units that are a function of store and week.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import duckdb
import pytest

from eval_pipelines.core.errors import InputError, NotFoundError
from eval_pipelines_tests.helpers.query_tables import (
    ESTIMATE,
    HURRIED,
    HURRIED_ROWS,
    LINKED,
    PREDICT,
    engine_answer,
    load_linked,
    load_products,
    partition_keys,
    query_runs,
    stored_counts,
    without_evaluation,
)
from eval_pipelines_tests.helpers.stuck_runs import interrupt_once_materialized

if TYPE_CHECKING:
    pass


def test_a_query_is_evaluated_by_a_dagster_run_and_answers_what_the_engine_answers(
    workdir: Path,
) -> None:
    from eval_pipelines import api

    version = load_products(workdir)
    response = api.run_query(PREDICT)
    oracle = engine_answer(PREDICT)
    # Exactly 003's keys (the selected metrics), with the engine's values.
    assert without_evaluation(response) == oracle.result
    assert set(without_evaluation(response)) == set(PREDICT["select"])
    assert response.response["n"] == 20 and response.response["testSamples"] == 20
    assert response.response["trainSamples"] == 80  # hold-out: total - testSamples
    # By hand: 5 of the 20 test rows (i = 5 mod 20) carry the next category's word and the
    # model follows the word: 15/20. The four categories are equally common in training and in
    # the test rows, so the baseline is right on 5 of 20 whichever it names.
    assert response.response["accuracy"] == 0.75
    assert response.response["baseAccuracy"] == 0.25
    evaluation = response.evaluation
    assert re.fullmatch(r"q-[0-9a-f]{12}", evaluation.eval_id)
    assert evaluation.cached is False
    assert evaluation.folds is None
    assert list(evaluation.sources or ()) == [
        {"name": "products", "kind": "table", "version": version, "rows": 100}
    ]
    assert evaluation.metrics == oracle.metrics  # every scalar metric, whatever the select
    assert set(oracle.metrics) > set(PREDICT["select"])
    (run,) = query_runs()
    assert run.run_id == evaluation.run_id
    assert run.status == dg.DagsterRunStatus.SUCCESS
    assert run.job_name == "evaluate_query_job"
    assert run.tags["dagster/partition"] == evaluation.eval_id
    assert partition_keys() == [evaluation.eval_id]


def test_an_estimate_answers_what_the_engine_answers(workdir: Path) -> None:
    from eval_pipelines import api

    load_products(workdir)
    response = api.run_query(ESTIMATE)
    assert without_evaluation(response) == engine_answer(ESTIMATE).result
    assert set(without_evaluation(response)) == set(ESTIMATE["select"])
    assert response.response["mae"] < response.response["baselineMae"]


def test_the_same_query_on_the_same_data_is_answered_from_the_stored_result(
    workdir: Path,
) -> None:
    from eval_pipelines import api

    load_products(workdir)
    first = api.run_query(PREDICT)
    # The same document with its keys in another order, given as JSON text: the same query.
    reordered = json.dumps(dict(reversed(list(PREDICT.items()))))
    again = api.run_query(reordered)
    assert again.evaluation.cached is True
    assert again.evaluation.eval_id == first.evaluation.eval_id
    assert again.evaluation.run_id == first.evaluation.run_id
    assert without_evaluation(again) == without_evaluation(first)
    assert len(query_runs()) == 1  # no second run

    # New data (the table reloaded with other unit counts) is another evaluation, with a run
    # of its own, even for a query that reads none of the changed values.
    load_products(workdir, shift=1)
    reloaded = api.run_query(PREDICT)
    assert reloaded.evaluation.eval_id != first.evaluation.eval_id
    assert reloaded.evaluation.cached is False
    assert without_evaluation(reloaded) == without_evaluation(first)
    assert len(query_runs()) == 2


def test_a_result_stored_by_a_run_interrupted_before_its_step_succeeded_is_not_served(
    workdir: Path,
) -> None:
    # The interrupt (SIGINT, as Ctrl-C and the UI's Terminate send it) reaches evaluate_result
    # after the step stored its result and before the step succeeded: the run ends canceled,
    # and the result it left must be neither complete nor served from the store.
    from eval_pipelines import api, runs
    from eval_pipelines.runs.instance import dagster_instance

    load_products(workdir)
    eval_id = api.run_query(PREDICT).evaluation.eval_id
    instance = dagster_instance()
    rerun = runs.create_inline_run(instance, runs.kind_of("query"), eval_id)
    assert rerun is not None

    with pytest.raises(runs.RunInterrupted):
        runs.execute_run_here(
            instance, rerun, on_event=interrupt_once_materialized("evaluate_result")
        )

    conn = duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True)
    try:
        (written_by,) = conn.execute(
            "SELECT run_id FROM query_results WHERE eval_id = ?", [eval_id]
        ).fetchone()
    finally:
        conn.close()
    assert written_by == rerun.run_id  # stored before the interrupt
    stored = api.get_query(eval_id)
    assert stored.evaluation.status == "no result" and stored.response is None
    assert stored.evaluation.run is not None and stored.evaluation.run["state"] == "canceled"
    again = api.run_query(PREDICT)
    assert again.evaluation.cached is False and again.evaluation.run_id != rerun.run_id
    assert api.get_query(eval_id).evaluation.status == "complete"


def test_folds_sweep_every_row_once_and_are_an_evaluation_of_their_own(workdir: Path) -> None:
    from eval_pipelines import api

    load_products(workdir)
    single = api.run_query(PREDICT)
    swept = api.run_query(PREDICT, folds=5)
    assert swept.evaluation.eval_id != single.evaluation.eval_id
    assert swept.evaluation.folds == 5
    assert without_evaluation(swept) == engine_answer(PREDICT, folds=5).result
    assert api.run_query(PREDICT, folds=5).evaluation.cached is True
    with pytest.raises(InputError, match=r"^folds=1: "):
        api.run_query(PREDICT, folds=1)
    resubstitution = {**PREDICT, "testSource": {"limit": 10}}
    del resubstitution["test"]
    # A sweep of a query whose test is not the sweep's selector is refused before anything
    # is stored or launched.
    runs_before = len(query_runs())
    with pytest.raises(InputError, match=r"^test=\{'limit': 10\}: a 5-fold sweep runs test"):
        api.run_query(resubstitution, folds=5)
    with pytest.raises(InputError, match=r"^test=.*: a 4-fold sweep runs test"):
        api.run_query(PREDICT, folds=4)
    assert stored_counts() == {"query_evaluations": 2, "query_results": 2}
    assert len(query_runs()) == runs_before


def test_a_refused_query_stores_nothing(workdir: Path) -> None:
    from eval_pipelines import api

    load_products(workdir)
    no_test = {k: v for k, v in PREDICT.items() if k != "test"}
    with pytest.raises(InputError, match=r"^test=None: no test set"):
        api.run_query(no_test)
    with pytest.raises(NotFoundError, match="no table or case named 'nowhere'"):
        api.run_query({**PREDICT, "evaluate": {**PREDICT["evaluate"], "from": "nowhere"}})
    assert stored_counts() == {"query_evaluations": 0, "query_results": 0}
    assert query_runs() == [] and partition_keys() == []

    # A column the table lacks is refused against the data before a run is launched.
    unknown_column = {**PREDICT, "evaluate": {**PREDICT["evaluate"], "predict": "colour"}}
    with pytest.raises(InputError, match="no column 'colour'"):
        api.run_query(unknown_column)
    assert stored_counts() == {"query_evaluations": 0, "query_results": 0}
    assert query_runs() == [] and partition_keys() == []


def test_a_truncated_result_says_so_and_is_not_served_from_the_store(workdir: Path) -> None:
    from eval_pipelines import api

    load_products(workdir, rows=HURRIED_ROWS)
    first = api.run_query(HURRIED)
    assert first.response["truncated"] is True
    assert first.response["requested"] == 1500
    assert first.response["n"] < 1500
    assert "time limit" in first.response["message"]
    again = api.run_query(HURRIED)
    assert again.evaluation.cached is False
    assert again.evaluation.eval_id == first.evaluation.eval_id
    assert again.evaluation.run_id != first.evaluation.run_id
    assert stored_counts() == {"query_evaluations": 1, "query_results": 1}  # replaced


def test_get_and_list_evaluations(workdir: Path) -> None:
    from eval_pipelines import api
    from eval_pipelines.api.queries import get_query, list_queries

    load_products(workdir)
    predicted = api.run_query(PREDICT)
    estimated = api.run_query(ESTIMATE, folds=5)
    shown = get_query(predicted.evaluation.eval_id)
    assert without_evaluation(shown) == without_evaluation(predicted)
    assert shown.evaluation.status == "complete"
    assert shown.evaluation.query == PREDICT
    assert shown.evaluation.run is not None and shown.evaluation.run["state"] == "succeeded"
    assert shown.evaluation.cached is None and "cached" not in shown.evaluation.to_json()
    listed = list_queries()
    assert [(e.eval_id, e.folds, e.status) for e in listed] == [
        (predicted.evaluation.eval_id, None, "complete"),
        (estimated.evaluation.eval_id, 5, "complete"),
    ]
    assert listed[0].predict == "category" and listed[1].estimate == "units"
    assert str(listed[0].headline).startswith("accuracy ")
    assert str(listed[1].headline).startswith("mae ")
    with pytest.raises(NotFoundError, match="q-000000000000"):
        get_query("q-000000000000")


def test_another_warehouse_than_the_run_reads_is_refused(workdir: Path) -> None:
    from eval_pipelines import api

    load_products(workdir)
    with pytest.raises(
        InputError, match=r"^warehouse=.*: the run reads .*EVAL_PIPELINES_WAREHOUSE"
    ) as refused:
        api.run_query(PREDICT, warehouse=workdir / "other.duckdb")
    # The value is shortened in the message when the path is long (pytest-xdist's tmp paths).
    assert str(refused.value.value).endswith("other.duckdb")
    assert stored_counts() == {"query_evaluations": 0, "query_results": 0}


def test_the_stage_and_its_storage_do_not_import_dagster() -> None:
    code = (
        "import sys, eval_pipelines.stages.queries, eval_pipelines.storage.query_evaluations\n"
        "print('dagster' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_linked_table_reloaded_is_another_evaluation(workdir: Path) -> None:
    from eval_pipelines import api
    from eval_pipelines.api.queries import get_query

    first_version = load_linked(workdir)
    first = api.run_query(LINKED)
    assert first.response["accuracy"] == 1.0  # the linked pet type decides every row
    pinned = get_query(first.evaluation.eval_id).evaluation.pinned
    assert {"name": "catalogue", "kind": "table", "version": first_version} in pinned

    # The catalogue reloaded with one pet type everywhere: the orders table is unchanged, but
    # the data the query reads is not, so the id is another and the answer is the current one.
    second_version = load_linked(workdir, constant=True)
    assert second_version != first_version
    second = api.run_query(LINKED)
    assert second.evaluation.cached is False
    assert second.evaluation.eval_id != first.evaluation.eval_id
    # No evidence left: every test row gets the majority channel (web, 10 of 15 test rows).
    assert second.response["accuracy"] == pytest.approx(10 / 15)
    shown = get_query(second.evaluation.eval_id).evaluation
    assert {"name": "catalogue", "kind": "table", "version": second_version} in shown.pinned
    assert {"name": "catalogue", "kind": "table", "version": second_version, "rows": 3} in (
        shown.sources or ()
    )
