"""Log validation: a file is taken whole or refused with every bad line named."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.lift.logs import mixed_artifacts, read_log, validate_log


def row(i: int, **changes: Any) -> dict[str, Any]:
    base = {
        "timestamp": f"2026-11-2{3 + i % 2}T10:00:00Z",
        "request_id": f"r{i}",
        "workspace_id": "ws",
        "cluster": f"trace-{i // 2}",
        "exposure_arm": "treated" if i % 2 else "lever_holdout",
        "exposure_epoch": "e1",
        "claim_type": "coding",
        "situation_class": "single",
        "source": "declared",
        "outcome": None if i % 5 == 0 else bool(i % 3),
    }
    return {**base, **changes}


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_good_log_is_typed_with_its_lines_and_days(tmp_path: Path) -> None:
    events = validate_log(read_log(write(tmp_path / "a.jsonl", [row(i) for i in range(6)])))
    assert events.get_column("line").to_list() == [1, 2, 3, 4, 5, 6]
    assert events.get_column("day").to_list()[:2] == [date(2026, 11, 23), date(2026, 11, 24)]
    assert events.schema["timestamp"] == pl.Datetime("us", "UTC")
    assert events.get_column("outcome").null_count() == 2  # unresolved: censored, kept
    assert {"artifact_key", "candidate", "baseline_head", "app_config"} <= set(events.columns)


def test_a_timestamp_with_an_offset_is_read_as_utc(tmp_path: Path) -> None:
    path = write(tmp_path / "a.jsonl", [row(0, timestamp="2026-11-23T23:30:00-02:00")])
    events = validate_log(read_log(path))
    assert events.get_column("day").to_list() == [date(2026, 11, 24)]


def test_every_bad_line_is_named_and_nothing_passes(tmp_path: Path) -> None:
    rows = [row(i) for i in range(8)]
    rows[1]["exposure_arm"] = "holdot"
    rows[2]["timestamp"] = "yesterday"
    rows[3]["request_id"] = "r4"
    rows[5]["source"] = "guessed"
    rows[6]["outcome"] = "yes"
    rows[7]["timestamp"] = "2019-12-31T23:00:00Z"
    with pytest.raises(InputError) as raised:
        validate_log(read_log(write(tmp_path / "bad.jsonl", rows)))
    message = str(raised.value)
    assert "line 2: exposure_arm='holdot': must be one of treated" in message
    assert "line 3: timestamp='yesterday': must be ISO 8601" in message
    assert "line 4: request_id='r4': must be unique in the file" in message
    assert "line 6: source='guessed'" in message
    assert "outcome='yes': must be true, false or null" in message
    assert "line 8: timestamp='2019-12-31T23:00:00Z': must be on or after 2020-01-01" in message
    assert message.endswith("(nothing was ingested)")


def test_turn_and_child_span_are_typed_and_optional(tmp_path: Path) -> None:
    rows = [row(0, turn=1, child_span=False), row(1, turn=3, child_span=True), row(2)]
    events = validate_log(read_log(write(tmp_path / "a.jsonl", rows)))
    assert events.schema["turn"] == pl.Int64 and events.schema["child_span"] == pl.Boolean
    assert events.get_column("turn").to_list() == [1, 3, None]
    assert events.get_column("child_span").to_list() == [False, True, None]
    plain = validate_log(read_log(write(tmp_path / "b.jsonl", [row(0)])))
    assert plain.get_column("turn").dtype == pl.Int64 and plain.get_column("turn").is_null().all()


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        ((2, 0), "line 2: turn=0: must be a whole number >= 1"),
        ((2, -1), "line 2: turn=-1: must be a whole number >= 1"),
        ((2, 1.5), "line 2: turn=1.5: must be a whole number >= 1"),
        ((2, "two"), "line 2: turn='two': must be a whole number >= 1"),
    ],
)
def test_a_bad_turn_is_refused_with_its_line(tmp_path: Path, values, shown) -> None:
    rows = [row(0, turn=values[0]), row(1, turn=values[1])]
    with pytest.raises(InputError) as raised:
        validate_log(read_log(write(tmp_path / "bad.jsonl", rows)))
    assert shown in str(raised.value) and "line 1" not in str(raised.value)


def test_a_bad_child_span_is_refused_with_its_line(tmp_path: Path) -> None:
    rows = [row(0, child_span=True), row(1, child_span="yes")]
    with pytest.raises(InputError) as raised:
        validate_log(read_log(write(tmp_path / "bad.jsonl", rows)))
    assert "line 2: child_span='yes': must be true, false or null" in str(raised.value)


def test_a_missing_column_and_an_unknown_file_type_are_refused(tmp_path: Path) -> None:
    rows = [{k: v for k, v in row(0).items() if k != "cluster"}]
    with pytest.raises(InputError, match="cluster.*required column is missing"):
        validate_log(read_log(write(tmp_path / "a.jsonl", rows)))
    with pytest.raises(InputError, match="unsupported log type"):
        read_log(write(tmp_path / "a.csv", [row(0)]))


def test_parquet_logs_name_rows(tmp_path: Path) -> None:
    path = tmp_path / "a.parquet"
    rows = [row(i) for i in range(3)]
    rows[2]["exposure_arm"] = "control"
    pl.DataFrame(rows).write_parquet(path)
    with pytest.raises(InputError, match="row 3: exposure_arm='control'"):
        validate_log(read_log(path), kind="parquet")


def test_an_artifact_whose_requests_disagree_is_mixed() -> None:
    frame = pl.DataFrame(
        {
            "workspace_id": ["ws"] * 5,
            "exposure_epoch": ["e1"] * 5,
            "artifact_key": ["a1", "a1", "a2", "a2", None],
            "exposure_arm": ["treated", "holdout", "treated", "treated", "holdout"],
        }
    )
    mixed = mixed_artifacts(frame)
    assert mixed.get_column("artifact_key").to_list() == ["a1"]
    assert mixed.get_column("arms").to_list() == [["holdout", "treated"]]


def test_an_artifact_is_mixed_only_within_one_workspace_and_epoch() -> None:
    # "a1" is treated in ws-a and lever_holdout in ws-b (each consistent in its workspace);
    # "a2" moved arm when ws-a's split changed epoch; "a3" disagrees within ws-b/e1.
    frame = pl.DataFrame(
        {
            "workspace_id": ["ws-a", "ws-a", "ws-b", "ws-b", "ws-a", "ws-a", "ws-b", "ws-b"],
            "exposure_epoch": ["e1", "e1", "e1", "e1", "e1", "e2", "e1", "e1"],
            "artifact_key": ["a1", "a1", "a1", "a1", "a2", "a2", "a3", "a3"],
            "exposure_arm": [
                "treated",
                "treated",
                "lever_holdout",
                "lever_holdout",
                "treated",
                "lever_holdout",
                "treated",
                "holdout",
            ],
        }
    )
    mixed = mixed_artifacts(frame)
    assert mixed.select("workspace_id", "exposure_epoch", "artifact_key").rows() == [
        ("ws-b", "e1", "a3")
    ]


def test_timestamps_with_and_without_an_offset_mix_in_one_file(tmp_path: Path) -> None:
    # Both forms are documented as valid; polars infers one format from the first row.
    first, second = "2026-11-23T10:00:00", "2026-11-23T23:30:00-02:00"
    for order in ((first, second), (second, first)):
        rows = [row(0, timestamp=order[0]), row(1, timestamp=order[1])]
        events = validate_log(read_log(write(tmp_path / "a.jsonl", rows)))
        stamps = dict(zip(order, events.get_column("timestamp").to_list(), strict=True))
        assert stamps[first].isoformat() == "2026-11-23T10:00:00+00:00"
        assert stamps[second].isoformat() == "2026-11-24T01:30:00+00:00"
    rows = [row(0, timestamp="2026-11-23T10:00:00.5Z"), row(1, timestamp="2026-11-23 10:00:00")]
    events = validate_log(read_log(write(tmp_path / "b.jsonl", rows)))
    assert [t.isoformat() for t in events.get_column("timestamp")] == [
        "2026-11-23T10:00:00.500000+00:00",
        "2026-11-23T10:00:00+00:00",
    ]


def test_lines_are_the_file_lines_after_a_blank_line(tmp_path: Path) -> None:
    rows = [row(i) for i in range(4)]
    rows[3]["source"] = "guessed"
    text = json.dumps(rows[0]) + "\n\n" + "".join(json.dumps(r) + "\r\n" for r in rows[1:3])
    path = tmp_path / "a.jsonl"
    path.write_text(text + "  \n" + json.dumps(rows[3]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="line 6: source='guessed'"):
        validate_log(read_log(path))
    rows[3]["source"] = "declared"
    path.write_text(text + "  \n" + json.dumps(rows[3]) + "\n", encoding="utf-8")
    assert validate_log(read_log(path)).get_column("line").to_list() == [1, 3, 4, 6]


def test_malformed_json_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(
        json.dumps(row(0)) + "\n\n" + json.dumps(row(1))[:-3] + "\n" + json.dumps(row(2)) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match=r"line 3: not valid JSON"):
        read_log(path)
    path.write_text(json.dumps(row(0)) + "\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2: must be a JSON object"):
        read_log(path)


def test_the_count_of_bad_values_is_every_bad_value(tmp_path: Path) -> None:
    rows = [row(i, outcome="maybe") for i in range(28)]
    with pytest.raises(InputError) as raised:
        validate_log(read_log(write(tmp_path / "a.jsonl", rows)))
    assert "log='28 bad values'" in str(raised.value)
    assert str(raised.value).endswith("; and 18 more (nothing was ingested)")
    rows = [row(i, timestamp="soon") for i in range(12)] + [row(12, exposure_arm="x")]
    with pytest.raises(InputError) as raised:
        validate_log(read_log(write(tmp_path / "b.jsonl", rows)))
    assert "log='13 bad values'" in str(raised.value)


def test_a_stored_request_is_matched_on_its_parsed_content() -> None:
    from eval_pipelines.core.lift.logs import CONTENT, match_stored

    events = validate_log(pl.DataFrame([row(i) for i in range(4)]))
    stored = events.head(3).select("request_id", *CONTENT)
    stored = stored.with_columns(
        stored_line=pl.Series([1, 2, 3], dtype=pl.Int64),
        stored_path=pl.lit("old.jsonl"),
        outcome=pl.when(pl.col("request_id") == "r2").then(False).otherwise(pl.col("outcome")),
    )
    matched = match_stored(events, stored)
    assert matched.fresh.get_column("request_id").to_list() == ["r3"]
    assert matched.skipped == 2
    assert matched.conflicts.rows(named=True) == [
        {
            "workspace_id": "ws",
            "request_id": "r2",
            "line": 3,
            "stored_line": 3,
            "stored_path": "old.jsonl",
            "column": "outcome",
            "value": "true",
            "stored_value": "false",
        }
    ]


def test_a_request_is_its_workspace_s() -> None:
    """Issue 28 item 13: another workspace's request of the same id is another request, in
    the file (no repeat) and against the stored rows (fresh, not a conflict)."""
    from eval_pipelines.core.lift.logs import CONTENT, match_stored, resolved_in_file

    both = [row(1), row(1, workspace_id="other", outcome=None)]
    events = validate_log(pl.DataFrame(both))
    assert resolved_in_file(events)[0].height == 2
    stored = events.head(1).select("request_id", *CONTENT)
    stored = stored.with_columns(stored_line=pl.lit(1, pl.Int64), stored_path=pl.lit("a.jsonl"))
    matched = match_stored(events, stored)
    assert matched.conflicts.height == 0 and matched.skipped == 1
    assert matched.fresh.get_column("workspace_id").to_list() == ["other"]


def test_an_unresolved_request_is_resolved_once_and_never_unresolved_again() -> None:
    """A request logged with no outcome (censored) and again when its outcome arrives is an
    update, not a conflict: the resolved row replaces the unresolved one. A resolved outcome
    that changes is still refused, and an unresolved row arriving after the resolved one is
    skipped (counted), never an overwrite."""
    from eval_pipelines.core.lift.logs import CONTENT, match_stored

    before = validate_log(pl.DataFrame([row(i) for i in (0, 1, 2, 4, 5)]))
    assert before.get_column("outcome").to_list() == [None, True, True, True, None]
    stored = before.select("request_id", *CONTENT).with_columns(
        stored_line=pl.Series([1, 2, 3, 4, 5], dtype=pl.Int64), stored_path=pl.lit("old.jsonl")
    )
    events = validate_log(
        pl.DataFrame(
            [
                row(0, outcome=True),  # resolved now: an update
                row(1, outcome=None),  # resolved before, unresolved again: skipped
                row(2, outcome=False),  # a resolved outcome changed: refused
                row(3),  # never stored
                row(4),  # the same: skipped
                row(5, outcome=False, cluster="trace-9"),  # resolved, but another cluster
            ]
        )
    )
    matched = match_stored(events, stored)
    assert matched.fresh.get_column("request_id").to_list() == ["r3"]
    assert matched.resolved.get_column("request_id").to_list() == ["r0"]
    assert matched.resolved.get_column("outcome").to_list() == [True]
    assert matched.skipped == 2 and matched.unresolved_after_resolved == 1
    assert matched.conflicts.select("request_id", "column", "value", "stored_value").rows() == [
        ("r2", "outcome", "false", "true"),
        ("r5", "cluster", "trace-9", "trace-2"),
    ]


def test_one_file_may_hold_a_request_s_unresolved_line_and_its_outcome(tmp_path: Path) -> None:
    """A day's log holds the line written when a request was served and the one written
    when its outcome arrived (either order). That repeat was refused as not unique in the
    file; it is the update, and the outcome's line is the one kept. Any other repeat is
    still refused, every line of it named."""
    from eval_pipelines.core.lift.logs import resolved_in_file

    rows = [row(0, outcome=None), row(1), row(2, outcome=None), row(0, outcome=True)]
    rows.append(row(2, outcome=False))
    rows.insert(0, row(2, outcome=None))  # two unresolved lines, then its outcome
    events = validate_log(read_log(write(tmp_path / "a.jsonl", rows)))
    kept, left_out = resolved_in_file(events)
    assert left_out == 3
    assert kept.select("request_id", "outcome", "line").rows() == [
        ("r1", True, 3),
        ("r0", True, 5),
        ("r2", False, 6),
    ]
    for repeat in (
        [row(0, outcome=True), row(0, outcome=True)],  # the same outcome twice
        [row(0, outcome=None), row(0, outcome=None)],  # never resolved, twice
        [row(0, outcome=True), row(0, outcome=False)],  # an outcome that changes
        [row(0, outcome=None), row(0, outcome=True, cluster="trace-9")],  # another cluster
    ):
        with pytest.raises(InputError) as raised:
            validate_log(read_log(write(tmp_path / "b.jsonl", [row(1), *repeat])))
        message = str(raised.value)
        assert "line 2: request_id='r0': must be unique in the file" in message
        assert "line 3: request_id='r0': must be unique in the file" in message
        assert "line 1:" not in message
