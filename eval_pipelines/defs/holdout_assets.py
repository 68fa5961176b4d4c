"""Holdout evaluation assets, partitioned by evaluation.

``eval_spec -> holdout_sample -> leave_out -> variant_predictions -> variant_scores ->
eval_report``.

Each asset is an adapter: it reads its partition key, calls one stage function and returns
metadata. Steps that open the warehouse run in the ``duckdb`` pool (one writer at a time);
classification runs outside it, one step per variant.
"""

from collections.abc import Iterator
from typing import Any

import dagster as dg

from eval_pipelines.defs.partitions import evaluations_partitions
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.stages import holdout
from eval_pipelines.storage.warehouse import transaction

POOL = "duckdb"
GROUP = "holdout"
KINDS = {"duckdb", "python"}


@dg.asset(partitions_def=evaluations_partitions, group_name=GROUP, kinds=KINDS, pool=POOL)
def eval_spec(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """The evaluation's stored spec, checked against the case versions it pinned."""
    with warehouse.connect(read_only=True) as conn:
        spec = holdout.check_spec(conn, context.partition_key)
    return dg.MaterializeResult(
        metadata={
            "case": spec.case_id,
            "seed": spec.seed,
            "sample_size": spec.sample_size,
            "grouping": dg.MetadataValue.json(spec.grouping.to_json()),
            "target_depth": dg.MetadataValue.json(list(spec.target_depth)),
            "variants": dg.MetadataValue.json([v.to_json() for v in spec.variants]),
            "records_version": spec.records_version,
            "tree_version": spec.tree_version,
            "memo_version": spec.memo_version,
        }
    )


@dg.asset(
    partitions_def=evaluations_partitions,
    group_name=GROUP,
    kinds=KINDS,
    pool=POOL,
    deps=[eval_spec],
)
def holdout_sample(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Seeded sample of labelled records (same case version, seed and size: same sample)."""
    with warehouse.connect() as conn, transaction(conn):
        meta = holdout.sample_stage(conn, context.partition_key)
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    partitions_def=evaluations_partitions,
    group_name=GROUP,
    kinds=KINDS,
    pool=POOL,
    deps=[holdout_sample],
)
def leave_out(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Per sampled record: the records held out of its evidence, and its retrieved evidence."""
    context.log.info("Loading or building the evidence index, then searching the sample")
    meta = holdout.leave_out_stage(
        warehouse.connect,
        context.partition_key,
        index_dir=warehouse.index_dir_path(),
        threads=warehouse.thread_count(),
    )
    return dg.MaterializeResult(metadata=meta)


@dg.op(ins={"after": dg.In(dg.Nothing)}, out=dg.DynamicOut(), pool=POOL)
def variant_jobs(
    context: dg.OpExecutionContext, warehouse: WarehouseResource
) -> Iterator[dg.DynamicOutput[Any]]:
    """Fan out: one classify step per variant, each carrying everything it needs."""
    with warehouse.connect(read_only=True) as conn:
        jobs = holdout.variant_jobs(conn, context.partition_key)
    for job in jobs:
        yield dg.DynamicOutput(job, mapping_key=job.variant.step_key)


@dg.op(retry_policy=dg.RetryPolicy(max_retries=2, delay=2))
def classify_variant(context: dg.OpExecutionContext, job: Any) -> Any:
    """Classify the shared sample with one variant's memo and config (no warehouse access)."""
    context.log.info(
        f"Classifying {len(job.records)} records with variant {job.variant.name!r} "
        f"({job.variant.config.classifier}, memo {job.memo_version})"
    )
    result = holdout.classify_variant(job)
    context.log.info(f"Variant {job.variant.name!r} done in {result.usage['seconds']} s")
    return result


@dg.op(pool=POOL)
def store_predictions(
    context: dg.OpExecutionContext, warehouse: WarehouseResource, results: list[Any]
) -> dict[str, Any]:
    """Write every variant's predictions, replacing the evaluation's previous ones."""
    with warehouse.connect() as conn, transaction(conn):
        summary = holdout.store_predictions(conn, context.partition_key, results)
    context.add_output_metadata(
        {
            "rows": summary["rows"],
            "failed_rows": summary["failed_rows"],
            "variants": dg.MetadataValue.json(summary["variants"]),
        }
    )
    return summary


@dg.graph_asset(
    partitions_def=evaluations_partitions,
    group_name=GROUP,
    kinds=KINDS,
    ins={"leave_out": dg.AssetIn(dagster_type=dg.Nothing)},
)
def variant_predictions(leave_out: Any) -> Any:
    """Each sampled record classified once per variant (one step per variant)."""
    jobs = variant_jobs(after=leave_out)
    return store_predictions(jobs.map(classify_variant).collect())


@dg.asset(
    partitions_def=evaluations_partitions,
    group_name=GROUP,
    kinds=KINDS,
    pool=POOL,
    deps=[variant_predictions],
)
def variant_scores(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """Per variant: accuracy per tree level (Wilson 95% and n), ceiling, declines, routing."""
    with warehouse.connect() as conn, transaction(conn):
        summary = holdout.scores_stage(conn, context.partition_key)
    return dg.MaterializeResult(metadata={"scores": dg.MetadataValue.json(summary)})


def _number(proportion: dict[str, Any]) -> float | None:
    value = proportion["value"]
    return float(value) if isinstance(value, int | float) else None


@dg.asset(
    partitions_def=evaluations_partitions,
    group_name=GROUP,
    kinds=KINDS,
    pool=POOL,
    deps=[variant_scores],
)
def eval_report(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    """The report: sample, levels, variants, paired comparisons (McNemar exact), warnings."""
    with warehouse.connect() as conn, transaction(conn):
        report, markdown = holdout.report_stage(conn, context.partition_key)
    metadata: dict[str, Any] = {
        "report": dg.MetadataValue.md(markdown),
        "warnings": dg.MetadataValue.json([w["code"] for w in report["warnings"]]),
        "sample_hash": report["sample"]["sampleHash"],
    }
    rows = []
    for variant in report["variants"]:
        score = variant["score"]
        row: dict[str, Any] = {"variant": variant["name"]}
        for depth, accuracy in score["targetDepth"].items():
            value = _number(accuracy)
            row[f"accuracy_L{depth}"] = value
            row[f"n_L{depth}"] = accuracy["n"]
            if value is not None:
                metadata[f"accuracy_L{depth}/{variant['name']}"] = value
        decline = _number(score["declineRate"])
        row["decline_rate"] = decline
        if decline is not None:
            metadata[f"decline_rate/{variant['name']}"] = decline
        rows.append(row)
    columns = list(rows[0]) if rows else ["variant"]
    metadata["variants"] = dg.MetadataValue.table(
        records=[dg.TableRecord({k: v for k, v in r.items() if v is not None}) for r in rows],
        schema=dg.TableSchema(
            columns=[dg.TableColumn(c, "string" if c == "variant" else "float") for c in columns]
        ),
    )
    metadata["report_json"] = dg.MetadataValue.json(report)
    return dg.MaterializeResult(metadata=metadata)


holdout_assets = [
    eval_spec,
    holdout_sample,
    leave_out,
    variant_predictions,
    variant_scores,
    eval_report,
]
