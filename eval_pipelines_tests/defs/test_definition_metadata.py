"""What the UI shows besides materialisations: column schemas that match the warehouse, owners,
tags and descriptions on every asset, the code location's name."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import duckdb
import yaml

from eval_pipelines.definitions import defs
from eval_pipelines.defs import golden_tables, holdout_tables, lift_tables, queries
from eval_pipelines.runs import LOCATION_NAME
from eval_pipelines.storage.warehouse import connect

REPO = Path(__file__).resolve().parents[2]


def test_column_schemas_match_the_migrated_warehouse(tmp_path: Path) -> None:
    with connect(tmp_path / "w.duckdb", create=True) as conn:
        schemas = {
            name.removesuffix("_SCHEMA").lower(): value
            for module in (holdout_tables, golden_tables, lift_tables, queries)
            for name, value in vars(module).items()
            if name.endswith("_SCHEMA") and isinstance(value, dg.TableSchema)
        }
        assert len(schemas) == 14
        for table, schema in schemas.items():
            columns = conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? ORDER BY ordinal_position",
                [table],
            ).fetchall()
            assert [(c.name, c.type) for c in schema.columns] == columns, table


def test_every_asset_has_its_table_owner_tags_and_how_to_create_partitions() -> None:
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        spec = graph.get(key)
        assert spec.owners == ["team:eval-pipelines"]
        kind = spec.tags.get("evaluation_kind")
        how_to_create = {
            "holdout": "eval-pipelines eval holdout",
            "golden": "workflow save",
            "query": "eval-pipelines evaluate",
            "lift": "lift ingest",
            "embeddings": "eval-pipelines case embed",
        }
        assert how_to_create[str(kind)] in (spec.description or "")
        if key.path[-1] not in ("evidence_index", "golden_report", "embedding_ann_index"):
            assert "dagster/column_schema" in spec.metadata
    leave_out = graph.get(dg.AssetKey("leave_out"))
    assert dg.AssetKey("evidence_index") in leave_out.parent_keys  # a real upstream


def test_checks_are_part_of_the_job_and_the_location_is_named() -> None:
    job = defs.resolve_job_def("holdout_eval")
    check_keys = {key.name for key in job.asset_layer.asset_graph.asset_check_keys}
    assert check_keys == {
        "no_leakage",
        "grouped",
        "candidates_supplied",
        "no_failed_rows",
        "sufficient_evidence",
        "leakage_gap",
        "aa_noise_floor",
    }
    workspace = yaml.safe_load((REPO / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["location_name"] == LOCATION_NAME


def test_reading_a_table_the_schema_names(tmp_path: Path) -> None:
    """The table names in the metadata are the warehouse's tables."""
    with connect(tmp_path / "w.duckdb", create=True):
        pass
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as conn:
        tables = {row[0] for row in conn.execute("SHOW TABLES").fetchall()}
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        name = graph.get(key).metadata.get("dagster/table_name")
        if name is not None:
            assert str(name).removeprefix("warehouse.main.") in tables


def test_metadata_figures_are_shown_to_four_decimals() -> None:
    from eval_pipelines.defs.families import shown

    assert shown(0.38749999999999996) == 0.3875
    assert shown({"a": [0.123456, 2, "x"], "b": (1e-9,)}) == {"a": [0.1235, 2, "x"], "b": (0.0,)}
    assert shown(True) is True and shown(3) == 3
