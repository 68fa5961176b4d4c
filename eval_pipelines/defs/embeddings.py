"""The approximate neighbour index of a case's embeddings, partitioned by case.

Built once per embedding set (pynndescent ``NNDescent``) and cached in the index folder; the
holdout evaluations whose variants ask for ``backend: pynndescent`` load it (or build it on
first use). Materialising a partition builds the index of the case's current embeddings ahead
of time and measures its recall@20 against the exact search on a seeded probe; ``case embed``
does it right after storing the vectors, so a case with embeddings never shows its partition
missing.
"""

import dagster as dg

from eval_pipelines.defs.families import REFUSALS, AssetFamily, refusal
from eval_pipelines.defs.partitions import cases
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.stages.embedding_index import ann_index_stage

HOW_TO_CREATE = (
    "Partitions are cases with embeddings, added by `eval-pipelines case embed CASE` or "
    "`case create ... --embeddings FILE`."
)
FAMILY = AssetFamily(cases, "embeddings", "embeddings", HOW_TO_CREATE)


@dg.asset(
    **FAMILY.options(
        "pynndescent index over the case's current embeddings, cached on disk per embedding "
        "set (`built` says whether this run built it), with its recall@20 against exact "
        "search on a seeded probe of 200 records.",
        kinds={"numpy", "python"},
    )
)
def embedding_ann_index(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    try:
        meta = ann_index_stage(
            warehouse.connect,
            context.partition_key,
            index_dir=warehouse.index_dir_path(),
            threads=warehouse.thread_count(),
        )
    except REFUSALS as error:
        raise refusal(error) from None
    meta["path"] = dg.MetadataValue.path(meta["path"])
    return dg.MaterializeResult(metadata=meta)


embedding_assets = [embedding_ann_index]

embedding_index_job = dg.define_asset_job(
    "embedding_index",
    selection=dg.AssetSelection.assets(embedding_ann_index),
    tags={KIND_TAG: "embedding_index"},
    description="Build the approximate neighbour index of a case's embeddings.",
)
