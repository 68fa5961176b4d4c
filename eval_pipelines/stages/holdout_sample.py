"""The first holdout stages: the seeded sample and the text index of the records version."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from eval_pipelines.core.holdout.sampling import draw_sample
from eval_pipelines.stages.holdout_spec import load_spec
from eval_pipelines.stages.text_index import OpenWarehouse, records_index
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import holdout as holdout_store


def sample_stage(conn: duckdb.DuckDBPyConnection, eval_id: str) -> dict[str, Any]:
    """Draw and store the seeded sample."""
    spec = load_spec(conn, eval_id)
    keys = cases_store.record_keys(conn, spec.case_id, spec.records_version)
    sample = draw_sample(keys, spec.sample_size, seed=spec.seed)
    holdout_store.save_sample(conn, eval_id, sample.keys, sample.sample_hash, spec.sample_size)
    return {
        "size": sample.size,
        "requested_size": spec.sample_size,
        "seed": spec.seed,
        "sample_hash": sample.sample_hash,
    }


def index_stage(
    open_warehouse: OpenWarehouse,
    eval_id: str,
    *,
    index_dir: Path,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Open the cached text index of the evaluation's records version, checked against the
    number of stored records, or build it (reading the texts only then; ``log`` hears of
    each segment written)."""
    with open_warehouse(read_only=True) as conn:
        spec = load_spec(conn, eval_id)
        n_records = cases_store.count_records(conn, spec.case_id, spec.records_version)

    def progress(written: int, segments: int) -> None:
        if log is not None:
            log(f"text index of {n_records:,} records: segment {written} of {segments} written")

    handle = records_index(
        open_warehouse,
        index_dir,
        spec.case_id,
        spec.records_version,
        n_records=n_records,
        progress=progress,
    )
    return {
        "case": spec.case_id,
        "records_version": spec.records_version,
        "records": handle.index.n_docs,
        "segments": len(handle.index.segments),
        "nonzeros": handle.index.nnz,
        "features": handle.index.n_features,
        "built": handle.built,
        "seconds": round(handle.seconds, 3),
        "path": str(handle.path),
    }
