"""The evidence index of each case, as an asset of its own (partitioned by case)."""

from typing import Any

import dagster as dg

from eval_pipelines.defs.partitions import cases_partitions
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.stages.evidence import load_or_build_index
from eval_pipelines.storage import cases


@dg.asset(
    partitions_def=cases_partitions, group_name="evidence", kinds={"duckdb", "numpy"}, pool="duckdb"
)
def evidence_index(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """TF-IDF vectors and posting lists of the case's records version, cached on disk.

    Every evaluation of that records version reuses it; ``leave_out`` builds it on demand when
    it is missing, so materialising this asset is a warm-up, never a prerequisite.
    """
    with warehouse.connect(read_only=True) as conn:
        info = cases.load_case(conn, context.partition_key)
        texts = cases.load_records(conn, info.case_id).get_column("text").to_list()
    handle = load_or_build_index(
        warehouse.index_dir_path(), info.case_id, info.records_version, texts
    )
    metadata: dict[str, Any] = {
        "records_version": info.records_version,
        "records": handle.index.n_docs,
        "nonzeros": int(handle.index.docs.nnz),
        "features": int(handle.index.docs.shape[1]),
        "built": handle.built,
        "seconds": round(handle.seconds, 3),
        "path": dg.MetadataValue.path(str(handle.path)),
    }
    return dg.MaterializeResult(metadata=metadata)
