"""The ``eval-pipelines`` command end to end, as a user runs it: real processes, real Dagster
runs (executed by the waiting CLI itself when no daemon runs), dotted numeric codes with
``--levels``, Ctrl-C, and the bad inputs. A test's later commands, whose output is all it
asserts, go through the same entry point (``main``) in the test's process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from eval_pipelines_tests.helpers.cli_calls import refused, succeeded

CLI = [sys.executable, "-m", "eval_pipelines.cli.main"]


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=os.environ.copy(), timeout=300
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}: {result.stderr}")
    return result


TARIFF_COLUMNS = (
    "--key-column",
    "sku",
    "--text-column",
    "description",
    "--label-column",
    "hs_code",
)


def create_tariff(
    records: Path | str, *extra: str, levels: str = "2,4,6,8", check: bool = True
) -> subprocess.CompletedProcess[str]:
    """``case create tariff`` with the goods file's column names."""
    return run(
        "case",
        "create",
        "tariff",
        "--records",
        str(records),
        "--levels",
        levels,
        *TARIFF_COLUMNS,
        *extra,
        check=check,
    )


def create_tariff_here(records: Path) -> None:
    """``case create tariff`` through the same command-line entry point, in this process: for
    tests about a later command, which need not pay a second interpreter's start-up."""
    from eval_pipelines.cli.main import main

    args = ["case", "create", "tariff", "--records", str(records), "--levels", "2,4,6,8"]
    assert main([*args, *TARIFF_COLUMNS]) == 0


@pytest.fixture
def tariff_files(workdir: Path) -> Path:
    """Goods descriptions labelled with dotted 8-digit codes (2/4/6/8-digit levels)."""
    rng = np.random.default_rng(0)
    materials = ["cotton", "wool", "steel", "copper", "oak", "glass"]
    goods = ["shirts", "rods", "sheets", "tubes", "panels", "threads"]
    adjectives = ["red", "blue", "large", "small", "knitted", "rolled", "polished", "raw"]
    rows = []
    for m, material in enumerate(materials):
        for g, good in enumerate(goods):
            for v in range(3):
                code = f"{m + 10:02d}{g + 1:02d}.{v + 1}0.00"
                for i in range(4):
                    words = [material, good, *rng.choice(adjectives, 2, replace=False)]
                    rows.append(
                        {
                            "sku": f"{code}-{i}",
                            "description": " ".join(words),
                            "hs_code": code,
                            "supplier": f"s{int(rng.integers(5))}",
                        }
                    )
    path = workdir / "tariff.csv"
    pl.DataFrame(rows).write_csv(path)
    return path


def test_new_user_flow_with_levels(
    workdir: Path, tariff_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    created = json.loads(create_tariff(tariff_files, "--target-depth", "1,2").stdout)
    assert created["records"] == 432 and created["treeMode"] == "prefix"
    variants = workdir / "variants.json"
    variants.write_text(
        json.dumps([{"name": "baseline"}, {"name": "majority", "config": {"strategy": "majority"}}])
    )
    holdout = ["eval", "holdout", "tariff", "--variants-file", str(variants), "--sample-size", "50"]
    grouped = ["--group-field", "supplier", "--wait", "--json"]
    out = run(*holdout, "--seed", "3", *grouped)
    status = json.loads(out.stdout)  # exactly one JSON document; progress went to stderr
    assert "started tariff-e0001-s3" in out.stderr
    started = {"evalId": status["evalId"]}
    assert started["evalId"] == "tariff-e0001-s3"
    assert status["status"] == "complete" and status["run"]["state"] == "succeeded"
    assert status["reportRunId"] == status["run"]["runId"]
    assert [v["status"] for v in status["variants"]] == ["succeeded", "succeeded"]
    report = status["report"]
    assert report["sample"]["grouping"]["mode"] == "field"
    assert [lv["name"] for lv in report["levels"]] == [
        "2 characters",
        "4 characters",
        "6 characters",
        "8 characters",
    ]

    # The commands a user types next, through the same entry point in this process: what
    # they print is the same, without another interpreter's start-up each.
    again = json.loads(succeeded(capsys, "eval", "status", "tariff", started["evalId"], "--json"))
    assert again["report"] == report and again["sampleHash"] == report["sample"]["sampleHash"]
    rows = [
        json.loads(line)
        for line in succeeded(
            capsys, "eval", "rows", "tariff", started["evalId"], "--variant", "majority"
        ).splitlines()
    ]
    assert len(rows) == 50 and {r["variant"] for r in rows} == {"majority"}
    compared = json.loads(
        succeeded(
            capsys,
            "eval",
            "compare",
            "tariff",
            started["evalId"],
            started["evalId"],
            "--baseline-variant",
            "baseline",
            "--candidate-variant",
            "majority",
            "--json",
        )
    )
    assert compared["levels"] == report["comparisons"][0]["levels"]
    other = json.loads(succeeded(capsys, *holdout, "--seed", "4", *grouped))
    message = refused(
        capsys,
        "eval",
        "compare",
        "tariff",
        started["evalId"],
        other["evalId"],
        "--baseline-variant",
        "baseline",
        "--candidate-variant",
        "baseline",
    )
    assert "sample hash differs" in message
    listed = json.loads(succeeded(capsys, "eval", "list", "tariff"))
    assert [(e["evalId"], e["complete"]) for e in listed] == [
        ("tariff-e0001-s3", True),
        ("tariff-e0002-s4", True),
    ]
    every_row = [
        json.loads(line)
        for line in succeeded(capsys, "eval", "rows", "tariff", started["evalId"]).splitlines()
    ]
    wrong = [r for r in every_row if not all(r["correct"].get(d, True) for d in ("1", "2"))]
    errors = [
        json.loads(line)
        for line in succeeded(
            capsys, "eval", "rows", "tariff", started["evalId"], "--errors-only"
        ).splitlines()
    ]
    assert 0 < len(errors) < len(every_row)  # the seed-3 sample has both kinds of rows
    assert errors == wrong


def test_memo_commands(
    workdir: Path, tariff_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create_tariff_here(tariff_files)
    entry = workdir / "entry.yaml"
    entry.write_text(
        "id: m_steel\ninstruction: Steel goods are chapter 12.\n"
        "when: {keywords: [steel]}\nthen: {prefer: ['12'], boost: 2}\n"
    )
    added = json.loads(run("memo", "add", "tariff", "--file", str(entry)).stdout)
    assert added["status"] == "proposed"
    # The other memo commands through the same entry point, in this process.
    approved = json.loads(succeeded(capsys, "memo", "approve", "tariff", "m_steel", "--by", "ana"))
    assert approved["status"] == "active"
    listed = json.loads(succeeded(capsys, "memo", "list", "tariff"))
    assert listed[0]["approvedBy"] == "ana"
    bad = workdir / "bad.yaml"
    bad.write_text("instruction: x\nwhen: {keywords: [a]}\nthen: {assign: '99'}\n")
    result = run("memo", "add", "tariff", "--file", str(bad), check=False)
    assert result.returncode == 2 and "memo.then.assign" in result.stderr
    for boost in (".nan", ".inf", "1e999"):
        bad.write_text(
            f"instruction: x\nwhen: {{keywords: [a]}}\nthen: {{prefer: ['12'], boost: {boost}}}\n"
        )
        message = refused(capsys, "memo", "add", "tariff", "--file", str(bad))
        assert "then.boost" in message and "finite" in message, (boost, message)
    assert len(json.loads(succeeded(capsys, "memo", "list", "tariff"))) == 1


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ([{"name": "a\nb"}], "variants[0].name='a\\nb': a variant name is 1-64 letters"),
        ([{"name": "x'; DROP TABLE variant_runs; --"}], "variants[0].name="),
        ([{"name": f"v{i}"} for i in range(21)], "variants='21 variants': give at most 20"),
        (
            [{"name": "b", "config": {"options": {"t": float("nan")}}}],
            "[0].config.options.t",
        ),
    ],
)
def test_bad_variants_exit_2_and_write_nothing(
    workdir: Path,
    tariff_files: Path,
    capsys: pytest.CaptureFixture[str],
    variants: list[dict],
    message: str,
) -> None:
    create_tariff_here(tariff_files)
    path = workdir / "variants.json"
    path.write_text(json.dumps(variants))  # NaN is written as the literal NaN
    refusal = refused(capsys, "eval", "holdout", "tariff", "--variants-file", path)
    assert message in refusal, refusal
    assert json.loads(succeeded(capsys, "eval", "list", "tariff")) == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sample-size", "9"], "sampleSize=9: must be an integer from 10 to 5000"),
        (["--grouping-threshold", "1.5"], "grouping.threshold=1.5"),
        (["--grouping-mode", "fuzzy"], "grouping.mode='fuzzy'"),
        (["--grouping-mode", "none", "--group-field", "supplier"], "groupField='supplier'"),
        (["--group-field", "colour"], "groupField='colour': is not a metadata column"),
        (["--grouping-threshold", "nan"], "'nan': must be a finite number"),
        (["--wait", "--timeout", "nan"], "'nan': must be a finite number"),
        (["--wait", "--timeout", "0"], "'0': must be a positive number of seconds"),
    ],
)
def test_bad_flags_exit_2_and_write_nothing(
    workdir: Path,
    tariff_files: Path,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    message: str,
) -> None:
    create_tariff_here(tariff_files)
    variants = workdir / "variants.json"
    variants.write_text(json.dumps([{"name": "baseline"}]))
    holdout = ["eval", "holdout", "tariff", "--variants-file", str(variants)]
    assert message in refused(capsys, *holdout, *flags)
    listed = succeeded(capsys, *holdout, "--no-launch")
    assert json.loads(listed)["evalId"] == "tariff-e0001-s7"  # nothing was reserved


def test_bad_records_file_exit_2(workdir: Path, tariff_files: Path) -> None:
    frame = pl.read_csv(tariff_files)
    frame.with_columns(
        pl.when(pl.col("sku") == frame["sku"][5])
        .then(pl.lit("0101"))
        .otherwise(pl.col("hs_code"))
        .alias("hs_code")
    ).write_csv("bad.csv")
    result = create_tariff("bad.csv", "--tree", "x.csv", check=False)
    assert result.returncode == 2  # --tree and --levels together: argparse refuses
    result = create_tariff("bad.csv", levels="2,4,6", check=False)
    assert result.returncode == 2 and "label=" in result.stderr
    assert not (workdir / "warehouse.duckdb").exists()


def test_dagster_cli_rematerialises_a_stage_reproducibly(small_case: str) -> None:
    from eval_pipelines import api

    eval_id = api.start_holdout_eval(
        small_case, [{"name": "baseline"}], api.HoldoutOptions(sample_size=30), wait=True
    ).eval_id
    before_status = api.get_holdout_eval(small_case, eval_id)
    before = before_status.report
    dagster = Path(sys.executable).parent / "dagster"
    result = subprocess.run(
        [
            str(dagster),
            "asset",
            "materialize",
            "-m",
            "eval_pipelines.definitions",
            "--select",
            "holdout_sample*",
            "--partition",
            eval_id,
        ],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    after = api.get_holdout_eval(small_case, eval_id)
    scores = [[v["score"] for v in r["variants"]] for r in (after.report, before)]
    assert scores[0] == scores[1]  # usage (wall seconds) may differ, the scores may not
    assert after.report["sample"] == before["sample"]
    # The status follows the newest run of the partition, whoever launched it.
    assert after.run_id != before_status.run_id
    assert after.report_run_id == after.run_id and after.run.state == "succeeded"
    # It selected eval_report and everything upstream but eval_spec: a run that wrote the report.
    assert (after.status, after.run_assets) == ("complete", None)
    assert [v.status for v in after.variants] == ["succeeded"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["case", "list"], "does not exist yet: create a case first"),
        (["eval", "status", "nope", "nope-e0001-s1"], "does not exist yet"),
        (["eval", "rows", "nope", "nope-e0001-s1"], "does not exist yet"),
        (["memo", "list", "nope"], "does not exist yet"),
        (["eval", "holdout", "nope", "--variants-file", "latin1.json"], "is not UTF-8 text"),
        (["eval", "holdout", "nope", "--variants-file", "folder"], "is a directory"),
        (
            ["eval", "holdout", "nope", "--variants-file", "v.json", "--config-file", "folder"],
            "--config-file='folder': is a directory",
        ),
        (["memo", "add", "nope", "--file", "broken.yaml"], "is not valid YAML"),
        (["memo", "add", "nope", "--file", "latin1.json"], "is not UTF-8 text"),
        (["eval", "holdout", "nope"], "the following arguments are required"),
        (["eval", "frobnicate"], "invalid choice"),
        (["case", "create", "c", "--records", "r.csv", "--levels", "2,x"], "comma-separated"),
        (["case", "create", "abc\n", "--records", "r.csv", "--levels", "2"], "a case id is"),
        # Nested a few thousand levels: a RecursionError traceback (exit 1) before.
        (["eval", "holdout", "nope", "--variants-file", "deep.json"], "nests deeper than 64"),
        (["evaluate", "--file", "deep_query.json"], "nests deeper than 64 levels"),
        (["memo", "add", "nope", "--file", "deep.yaml"], "nests deeper than 64 levels"),
        # One 2 MiB line (a 10 MB one ran past 120 s in the YAML parser).
        (["memo", "add", "nope", "--file", "long.yaml"], "is larger than 1 MiB"),
        (["eval", "holdout", "nope", "--variants-file", "long.json"], "is larger than 1 MiB"),
        # A small YAML file whose aliases expand to 10^9 values.
        (["memo", "add", "nope", "--file", "laughs.yaml"], "holds more than 200,000 values"),
        (["eval", "holdout", "nope", "--variants-file", "nan.json"], "holds nan at [0].config"),
    ],
)
def test_refusals_are_one_line_exit_2_and_write_nothing(
    workdir: Path, args: list[str], message: str
) -> None:
    (workdir / "deep.json").write_text("[" * 5000 + "]" * 5000)
    (workdir / "deep_query.json").write_text('{"from": ' + "[" * 5000 + "]" * 5000 + "}")
    (workdir / "deep.yaml").write_text("instruction: " + "[" * 5000 + "]" * 5000 + "\n")
    (workdir / "long.yaml").write_text("instruction: " + "a" * (2 << 20) + "\n")
    (workdir / "long.json").write_text('[{"name": "' + "a" * (2 << 20) + '"}]')
    laughs = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [
        f"{b}: &{b} [{', '.join(['*' + a] * 10)}]"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    (workdir / "laughs.yaml").write_text("\n".join(laughs) + "\n")
    (workdir / "nan.json").write_text('[{"name": "b", "config": {"declineBelow": NaN}}]')
    (workdir / "latin1.json").write_bytes(b'[{"name": "caf\xe9"}]')
    (workdir / "folder").mkdir()
    (workdir / "broken.yaml").write_text("when: [1\n")
    (workdir / "v.json").write_text('[{"name": "baseline"}]')
    result = run(*args, check=False)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (workdir / "warehouse.duckdb").exists()


def test_a_refused_command_on_an_unknown_case_writes_nothing(
    workdir: Path, tariff_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    create_tariff_here(tariff_files)
    before = (workdir / "warehouse.duckdb").read_bytes()
    (workdir / "v.json").write_text('[{"name": "baseline"}]')
    for args in (
        ["eval", "holdout", "other", "--variants-file", "v.json"],
        ["memo", "list", "other"],
        ["eval", "list", "other"],
    ):
        assert "no such case" in refused(capsys, *args)
    assert (workdir / "warehouse.duckdb").read_bytes() == before


def test_rows_into_a_closed_pipe_exit_quietly(small_case: str) -> None:
    from eval_pipelines import api

    eval_id = api.start_holdout_eval(
        small_case, [{"name": "baseline"}], api.HoldoutOptions(sample_size=300), wait=True
    ).eval_id
    command = " ".join([*CLI, "eval", "rows", small_case, eval_id])
    result = subprocess.run(
        f"{command} | head -1", shell=True, capture_output=True, text=True, env=os.environ.copy()
    )
    assert json.loads(result.stdout)["variant"] == "baseline"
    assert result.stderr == ""


def test_a_warehouse_path_that_is_not_duckdb_is_refused(workdir: Path, tariff_files: Path) -> None:
    for args in (["case", "list"], ["eval", "list", "tariff"]):
        result = run("--warehouse", str(tariff_files), *args, check=False)
        assert result.returncode == 2 and "is not a DuckDB database file" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def _holdout_wait(case: str, variants: Path, seed: int) -> list[str]:
    return [
        *CLI,
        "eval",
        "holdout",
        case,
        "--variants-file",
        str(variants),
        "--sample-size",
        "30",
        "--seed",
        str(seed),
        "--wait",
        "--json",
    ]


def test_wait_without_a_daemon_runs_the_evaluation_in_the_cli(small_case: str) -> None:
    from eval_pipelines import runs
    from eval_pipelines.runs.instance import dagster_instance

    variants = Path("variants.json")
    variants.write_text(json.dumps([{"name": "baseline"}, {"name": "five", "config": {}}]))
    # stderr a pipe and --json: the started notice, no progress line (issue 19, item 27).
    environ = {k: v for k, v in os.environ.items() if k != "EVAL_PIPELINES_PROGRESS"}
    out = subprocess.run(
        _holdout_wait(small_case, variants, 5),
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)  # one document: nothing the run printed reached stdout
    assert status["status"] == "complete"
    assert [v["status"] for v in status["variants"]] == ["succeeded", "succeeded"]
    # Before, six "[small-e0001-s5] running (run ...); baseline: pending, ..." lines followed.
    assert out.stderr.splitlines() == [
        f"started {status['evalId']} (run {status['runId']}, running in this process)"
    ]
    instance = dagster_instance()
    run = instance.get_run_by_id(status["runId"])
    assert run is not None and run.remote_job_origin is not None
    assert run.remote_job_origin.location_name == runs.LOCATION_NAME  # the UI can re-execute it
    assert run.tags[runs.PARTITION_TAG] == status["evalId"]
    # No dispatcher, code server or run process was started for it.
    assert not (Path(os.environ["DAGSTER_HOME"]) / "eval_pipelines_dispatcher.log").exists()


def test_ctrl_c_cancels_the_run_the_cli_executes(small_case: str) -> None:
    import dagster as dg

    from eval_pipelines import runs
    from eval_pipelines.defs.pools import DUCKDB_POOL
    from eval_pipelines.runs.instance import dagster_instance

    instance = dagster_instance()
    # Another run writing the warehouse holds the pool's slot: the CLI's run waits for it.
    writer = instance.add_run(
        dg.DagsterRun(
            job_name="holdout_eval",
            status=dg.DagsterRunStatus.STARTED,
            tags={runs.KIND_TAG: "holdout", runs.PARTITION_TAG: "other-e0001-s1"},
        )
    )
    storage = instance.event_log_storage
    assert storage.claim_concurrency_slot(DUCKDB_POOL, writer.run_id, "eval_report").is_claimed
    variants = Path("variants.json")
    variants.write_text(json.dumps([{"name": "baseline"}]))
    cli = subprocess.Popen(
        _holdout_wait(small_case, variants, 6),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 120
        blocked = None
        while blocked is None:
            assert time.monotonic() < deadline and cli.poll() is None, "the run never waited"
            time.sleep(0.2)
            for run in instance.get_runs(dg.RunsFilter(tags={runs.KIND_TAG: "holdout"})):
                logs = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
                if any("blocked by limit for pool" in r.user_message for r in logs):
                    blocked = run
        cli.send_signal(signal.SIGINT)
        time.sleep(0.5)
        storage.free_concurrency_slots_for_run(writer.run_id)
        out, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130, err
    assert out == ""  # no status document for an interrupted command
    assert f"interrupted: run {blocked.run_id} of evaluation" in err
    assert "was canceled; start it again with 'eval-pipelines eval rerun small " in err
    reloaded = instance.get_run_by_id(blocked.run_id)
    assert reloaded is not None and reloaded.status == dg.DagsterRunStatus.CANCELED
    assert storage.get_concurrency_info(DUCKDB_POOL).active_run_ids == set()
