"""The in-process tree cache of ``storage.cases.load_tree``: reused within a warehouse, never
served for a stored tree it was not built from."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl

from eval_pipelines import api
from eval_pipelines.core.tree import tree_from_parent_links
from eval_pipelines.storage import cases as cases_store

RECORDS = pl.DataFrame(
    {
        "record_key": ["r1", "r2", "r3", "r4"],
        "text": ["acute pain", "chronic pain", "fracture of arm", "fracture of leg"],
        "label": ["A01.1", "A01.2", "B02.1", "B02.2"],
    }
)


def _tree(kinds: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "code": ["A", "A01", "A01.1", "A01.2", "B", "B02", "B02.1", "B02.2"],
            "parent": [None, "A", "A01", "A01", None, "B", "B02", "B02"],
            "kind": kinds,
        }
    )


def _warehouse_with_tree(folder: Path, kinds: list[str]) -> tuple[Path, str]:
    folder.mkdir()
    RECORDS.write_parquet(folder / "records.parquet")
    _tree(kinds).write_parquet(folder / "tree.parquet")
    warehouse = folder / "warehouse.duckdb"
    api.create_case(
        "c",
        api.CaseSource(folder / "records.parquet", tree_path=folder / "tree.parquet"),
        warehouse=warehouse,
    )
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        version = cases_store.load_case(conn, "c").tree_version
    return warehouse, version


def test_the_cache_returns_the_built_tree_and_tells_kinds_apart(workdir: Path) -> None:
    first_kinds = ["chapter", "category", "code", "code", "chapter", "category", "code", "code"]
    other_kinds = ["part", "group", "leaf", "leaf", "part", "group", "leaf", "leaf"]
    first, first_version = _warehouse_with_tree(workdir / "one", first_kinds)
    other, other_version = _warehouse_with_tree(workdir / "two", other_kinds)
    # Kinds are not part of the tree version: both warehouses hold the same version.
    assert first_version == other_version

    with duckdb.connect(str(first), read_only=True) as conn:
        loaded = cases_store.load_tree(conn, "c", first_version)
        again = cases_store.load_tree(conn, "c", first_version)
    assert again is loaded
    assert loaded == tree_from_parent_links(_tree(first_kinds))
    assert [level.name for level in loaded.levels] == ["chapter", "category", "code"]

    with duckdb.connect(str(other), read_only=True) as conn:
        from_other = cases_store.load_tree(conn, "c", other_version)
    assert [level.name for level in from_other.levels] == ["part", "group", "leaf"]
    assert from_other.paths == loaded.paths


def test_a_tree_without_kinds_reads_level_n_after_storage(workdir: Path) -> None:
    """A tree file with no ``kind`` column is stored with null kinds; read back, its levels are
    'level 1', 'level 2', ... (they read 'None L1', 'None L2' in every report)."""
    folder = workdir / "nokind"
    folder.mkdir()
    RECORDS.write_parquet(folder / "records.parquet")
    _tree(["x"] * 8).drop("kind").write_parquet(folder / "tree.parquet")
    warehouse = folder / "warehouse.duckdb"
    created = api.create_case(
        "c",
        api.CaseSource(folder / "records.parquet", tree_path=folder / "tree.parquet"),
        warehouse=warehouse,
    )
    assert [lv.name for lv in created.levels] == ["level 1", "level 2", "level 3"]
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        loaded = cases_store.load_tree(conn, "c", cases_store.load_case(conn, "c").tree_version)
    assert [level.name for level in loaded.levels] == ["level 1", "level 2", "level 3"]
