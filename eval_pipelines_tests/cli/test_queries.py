"""``eval-pipelines evaluate`` and ``evaluations list/show`` driven in-process through
:func:`eval_pipelines.cli.main.main`: JSON in, JSON out with exactly 003's keys; a refused
query exits 2 with one line and stores nothing; the stored result answers a repeated query;
``--folds``; one ``--submit`` through the real run queue.

The data and the engine oracle are those of :mod:`eval_pipelines_tests.api.test_queries`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from eval_pipelines_tests.helpers.query_tables import (
    ESTIMATE,
    PREDICT,
    engine_answer,
    load_products,
    partition_keys,
    query_runs,
    stored_counts,
)


def cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr) of this command only."""
    from eval_pipelines.cli.main import main

    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_query(folder: Path, query: dict[str, Any], name: str = "query.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(query))
    return path


def evaluate_json(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[Any, str]:
    code, out, err = cli(capsys, "evaluate", *argv, "--json")
    assert code == 0, err
    return json.loads(out), err


def refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    """Exit 2, nothing on stdout, one ``error: `` line on stderr (returned without it)."""
    code, out, err = cli(capsys, *argv)
    assert code == 2, (argv, code, out, err)
    assert out == "", (argv, out)
    assert err.startswith("error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    return err[len("error: ") : -1]


def test_json_in_json_out_with_exactly_the_keys_003_names(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_products(workdir)
    answer, err = evaluate_json(capsys, "--file", write_query(workdir, PREDICT))
    assert answer == engine_answer(PREDICT).result
    assert set(answer) == set(PREDICT["select"])
    (run,) = query_runs()
    (eval_id,) = partition_keys()
    assert f"evaluation {eval_id} (run {run.run_id})" in err

    # Unselected, an estimate answers every scalar metric of its kind.
    everything = {k: v for k, v in ESTIMATE.items() if k != "select"}
    answer, _ = evaluate_json(capsys, "--file", write_query(workdir, everything))
    assert answer == engine_answer(everything).result
    assert {"n", "mae", "rmse", "r2", "baselineMae", "maeGain"} <= set(answer)


def test_a_query_from_stdin(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    load_products(workdir)
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(ESTIMATE)))
    answer, _ = evaluate_json(capsys, "--file", "-")
    assert answer == engine_answer(ESTIMATE).result


def test_a_repeated_query_is_answered_from_the_stored_result(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_products(workdir)
    path = write_query(workdir, PREDICT)
    first, _ = evaluate_json(capsys, "--file", path)
    again, err = evaluate_json(capsys, "--file", path)
    assert again == first
    (eval_id,) = partition_keys()
    assert err.strip().endswith(f"evaluation {eval_id} (cached)")
    assert len(query_runs()) == 1


def test_folds(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load_products(workdir)
    path = write_query(workdir, PREDICT)
    swept, _ = evaluate_json(capsys, "--file", path, "--folds", "5")
    assert swept == engine_answer(PREDICT, folds=5).result
    assert len(partition_keys()) == 1
    reason = refused(capsys, "evaluate", "--file", path, "--folds", "1")
    assert reason.startswith("--folds=1: ")  # the API names `folds`; the shell its flag


def test_human_output_opens_with_the_headline(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_products(workdir)
    code, out, err = cli(capsys, "evaluate", "--file", write_query(workdir, PREDICT))
    assert code == 0, err
    metrics = engine_answer(PREDICT).metrics
    lines = out.splitlines()
    assert lines[0] == (
        f"accuracy {metrics['accuracy']:.4f} vs baseAccuracy {metrics['baseAccuracy']:.4f} (n = 20)"
    )
    # The metrics the query selects, in its order; not the ones it leaves out.
    shown = [line.split()[0] for line in lines[1:-1]]
    assert shown == PREDICT["select"]
    assert any(line.split() == ["meanRank", f"{metrics['meanRank']:.4f}"] for line in lines)
    (eval_id,) = partition_keys()
    assert lines[-1].startswith(f"evaluation {eval_id} (run ")


def test_a_refused_query_exits_2_with_one_line_and_stores_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    load_products(workdir)
    no_test = write_query(workdir, {k: v for k, v in PREDICT.items() if k != "test"}, "a.json")
    assert refused(capsys, "evaluate", "--file", no_test).startswith("test=None: no test set")
    unknown_key = write_query(workdir, {**PREDICT, "limit": 3}, "b.json")
    assert "limit" in refused(capsys, "evaluate", "--file", unknown_key)
    relate = {**PREDICT, "evaluate": {"from": "products", "relate": "category"}}
    reason = refused(capsys, "evaluate", "--file", write_query(workdir, relate, "r.json"))
    assert "a relate evaluation is not supported" in reason
    assert "'Which evaluations run where'" in reason
    not_json = workdir / "c.json"
    not_json.write_text("{test:")
    assert "is not valid JSON" in refused(capsys, "evaluate", "--file", not_json)
    missing = refused(capsys, "evaluate", "--file", workdir / "missing.json")
    assert missing.endswith("file does not exist")
    nowhere = {**PREDICT, "evaluate": {**PREDICT["evaluate"], "from": "nowhere"}}
    assert "nowhere" in refused(capsys, "evaluate", "--file", write_query(workdir, nowhere))
    assert stored_counts() == {"query_evaluations": 0, "query_results": 0}
    assert query_runs() == [] and partition_keys() == []

    colour = {**PREDICT, "evaluate": {**PREDICT["evaluate"], "predict": "colour"}}
    assert "colour" in refused(capsys, "evaluate", "--file", write_query(workdir, colour))
    assert stored_counts() == {"query_evaluations": 0, "query_results": 0}
    assert partition_keys() == []


def test_evaluations_list_and_show(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load_products(workdir)
    answer, _ = evaluate_json(capsys, "--file", write_query(workdir, PREDICT))
    (eval_id,) = partition_keys()
    code, out, _ = cli(capsys, "evaluations", "list")
    assert code == 0
    assert [(e["evalId"], e["status"]) for e in json.loads(out)] == [(eval_id, "complete")]
    code, out, _ = cli(capsys, "evaluations", "show", eval_id, "--json")
    shown = json.loads(out)
    assert {k: v for k, v in shown.items() if k != "evaluation"} == answer
    code, out, _ = cli(capsys, "evaluations", "show", eval_id)
    assert code == 0 and out.startswith("accuracy ")
    assert refused(capsys, "evaluations", "show", "q-000000000000").startswith(
        "evalId='q-000000000000'"
    )


def test_the_documents_list_and_show_print_keep_their_keys_in_order(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The typed results (api.queries) print the documents the dicts printed before, key for
    key and in the same order: with a result, and for a query registered without one."""
    from eval_pipelines_tests.helpers.query_tables import register

    load_products(workdir)
    evaluate_json(capsys, "--file", write_query(workdir, PREDICT))
    (eval_id,) = partition_keys()
    code, out, _ = cli(capsys, "evaluations", "show", eval_id, "--json")
    shown = json.loads(out)
    assert list(shown)[-1] == "evaluation" and list(shown)[:-1] == PREDICT["select"]
    assert list(shown["evaluation"]) == [
        "evalId",
        "runId",
        "folds",
        "sources",
        "metrics",
        "elapsedSeconds",
        "query",
        "pinned",
        "status",
        "run",
        "createdAt",
    ]
    assert list(shown["evaluation"]["run"]) == ["runId", "state", "dagsterStatus", "reason"]
    waiting = register(ESTIMATE)  # stored as the API stores it before its run; no run yet
    code, out, _ = cli(capsys, "evaluations", "show", waiting, "--json")
    assert code == 0
    document = json.loads(out)
    assert list(document) == ["evaluation"]
    assert list(document["evaluation"]) == [
        "evalId",
        "folds",
        "query",
        "pinned",
        "status",
        "run",
        "createdAt",
    ]
    assert document["evaluation"]["status"] == "no result" and document["evaluation"]["run"] is None
    code, out, _ = cli(capsys, "evaluations", "show", waiting)
    assert out == f"evaluation {waiting}: no result yet (no run)\n"
    code, out, _ = cli(capsys, "evaluations", "list")
    listed = json.loads(out)
    assert [list(e) for e in listed] == [
        ["evalId", "createdAt", "predict", "from", "folds", "status", "headline", "runId"],
        ["evalId", "createdAt", "estimate", "from", "folds", "status", "headline", "runId"],
    ]
    assert listed[1]["headline"] is None and listed[1]["runId"] is None


def test_show_names_the_version_of_every_table_read_links_included(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eval_pipelines_tests.helpers.query_tables import LINKED, load_linked

    catalogue = load_linked(workdir)
    evaluate_json(capsys, "--file", write_query(workdir, LINKED))
    (eval_id,) = partition_keys()
    code, out, _ = cli(capsys, "evaluations", "show", eval_id)
    assert code == 0
    assert f"pins table 'catalogue' at version {catalogue}" in out.splitlines()
    assert any(line.startswith("pins table 'orders' at version ") for line in out.splitlines())


def test_submit_runs_through_the_queue(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    load_products(workdir)
    path = write_query(workdir, ESTIMATE)
    answer, _ = evaluate_json(capsys, "--file", path, "--submit", "--timeout", "300")
    assert answer == engine_answer(ESTIMATE).result
    (run,) = query_runs()
    assert run.tags.get("eval_pipelines/launched_by") == "eval-pipelines"
