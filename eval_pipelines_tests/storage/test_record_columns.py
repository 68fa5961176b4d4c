"""``storage.cases.load_records`` reads only the columns asked for, in the index's order."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from eval_pipelines.storage import cases as cases_store


def test_a_subset_of_columns_matches_the_full_load(small_case: str, workdir: Path) -> None:
    with duckdb.connect(str(workdir / "warehouse.duckdb"), read_only=True) as conn:
        version = cases_store.load_case(conn, small_case).records_version
        full = cases_store.load_records(conn, small_case, version)
        keys = cases_store.load_records(conn, small_case, version, columns=("record_key",))
        texts = cases_store.load_records(conn, small_case, version, columns=("text",))
        with pytest.raises(ValueError, match="must be some of"):
            cases_store.load_records(conn, small_case, version, columns=("record_key; DROP",))
    assert full.columns == list(cases_store.RECORD_COLUMNS)
    assert keys.columns == ["record_key"]
    assert keys.equals(full.select("record_key"))
    assert texts.equals(full.select("text"))
