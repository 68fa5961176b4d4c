"""Holdout evaluation assets, partitioned by holdout evaluation.

``eval_spec -> holdout_sample -> evidence_index -> leave_out -> variant_predictions ->
variant_scores, leakage_gap -> eval_report``

Each asset is an adapter: it reads its partition key, calls one stage function and returns
metadata. Steps that write the warehouse run in the ``duckdb`` pool (one at a time); the long
parts (building the text index, the search, classification) run outside it and open the
warehouse only briefly, waiting for the lock when another process holds it.
"""

import json
from collections.abc import Iterator
from typing import Any

import dagster as dg

from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER
from eval_pipelines.core.holdout.cost_report import (
    cost_per_record_text,
    relative_cost_text,
    shows_cost_per_record,
)
from eval_pipelines.core.stats import INSUFFICIENT
from eval_pipelines.defs.dagster_private import DagsterExecutionInterruptedError
from eval_pipelines.defs.families import REFUSALS, AssetFamily, refusal, shown
from eval_pipelines.defs.holdout_tables import (
    CANDIDATES_SCHEMA,
    EVAL_REPORTS_SCHEMA,
    EVALUATIONS_SCHEMA,
    HOLDOUT_SAMPLES_SCHEMA,
    LEAKAGE_GAPS_SCHEMA,
    PREDICTIONS_SCHEMA,
    VARIANT_LEVEL_SCORES_DISPLAY,
    VARIANT_LEVEL_SCORES_SCHEMA,
    table_metadata,
)
from eval_pipelines.defs.partitions import holdout_evaluations
from eval_pipelines.defs.pools import DUCKDB_POOL
from eval_pipelines.defs.resources import WarehouseResource
from eval_pipelines.defs.run_tags import KIND_TAG
from eval_pipelines.stages import holdout_classify
from eval_pipelines.stages import leave_out as leave_out_stages
from eval_pipelines.stages.holdout_report import report_stage, scores_stage
from eval_pipelines.stages.holdout_sample import index_stage, sample_stage
from eval_pipelines.stages.holdout_spec import load_spec
from eval_pipelines.stages.leakage_gap import leakage_gap_stage
from eval_pipelines.storage.warehouse import transaction

HOW_TO_CREATE = (
    "Partitions are holdout evaluations, created with `eval-pipelines eval holdout CASE "
    "--variants-file FILE` (or `api.start_holdout_eval`), which stores the spec and adds the "
    "partition. Adding a partition in the Materialize dialog creates no spec: its run fails "
    "in `eval_spec` and says so. Materialise existing partitions freely: every stage reads "
    "the stored spec and replaces its rows."
)


FAMILY = AssetFamily(holdout_evaluations, "holdout", "holdout", HOW_TO_CREATE)


@dg.asset(
    **FAMILY.options(
        "The evaluation's stored spec: case versions, sample, grouping, variants, memo."
    ),
    pool=DUCKDB_POOL,
    metadata=table_metadata("evaluations", EVALUATIONS_SCHEMA),
)
def eval_spec(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    try:
        with warehouse.connect(read_only=True) as conn:
            spec = load_spec(conn, context.partition_key)
    except REFUSALS as error:
        raise refusal(error) from None
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
    **FAMILY.options(
        "Seeded sample of labelled records (same records version, seed and size: same "
        "sample, whatever the grouping)."
    ),
    pool=DUCKDB_POOL,
    deps=[eval_spec],
    metadata=table_metadata("holdout_samples", HOLDOUT_SAMPLES_SCHEMA),
)
def holdout_sample(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    with warehouse.connect() as conn, transaction(conn):
        meta = sample_stage(conn, context.partition_key)
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    **FAMILY.options(
        "TF-IDF vectors and posting lists of the evaluation's records version, cached on "
        "disk: built by the first evaluation of that version, loaded by the others "
        "(`built` says which).",
        kinds={"numpy", "python"},
    ),
    deps=[eval_spec],
)
def evidence_index(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    meta = index_stage(
        warehouse.connect,
        context.partition_key,
        index_dir=warehouse.index_dir_path(),
        log=context.log.info,
    )
    meta["path"] = dg.MetadataValue.path(meta["path"])
    return dg.MaterializeResult(metadata=meta)


class RetrievalShardsConfig(dg.Config):
    """How many record ranges the exact TF-IDF search is split into (one step each; the
    merged result is exactly the unsharded one, so this changes where the work runs, never
    the report)."""

    shards: int = 1


@dg.op(ins={"after": dg.In(dg.Nothing)}, out=dg.DynamicOut())
def retrieval_shards(
    context: dg.OpExecutionContext, config: RetrievalShardsConfig, warehouse: WarehouseResource
) -> Iterator[dg.DynamicOutput[Any]]:
    """Fan out: the sample's positions, the groups decided up front and one step per shard."""

    try:
        plan = leave_out_stages.plan_retrieval(
            warehouse.connect,
            context.partition_key,
            index_dir=warehouse.index_dir_path(),
            threads=warehouse.thread_count(),
            shards=config.shards,
        )
    except REFUSALS as error:
        raise refusal(error) from None
    context.log.info(
        f"Exact TF-IDF search in {len(plan.ranges)} shard(s) of the records: {list(plan.ranges)}"
    )
    # An evaluation that never searches TF-IDF still passes its plan on, as one empty shard.
    for shard in range(max(len(plan.ranges), 1)):
        yield dg.DynamicOutput((plan, shard), mapping_key=f"shard_{shard}")


@dg.op
def retrieve_shard(context: dg.OpExecutionContext, warehouse: WarehouseResource, task: Any) -> Any:
    """Exact TF-IDF top-k and near-duplicates among one shard's records (no warehouse writes)."""
    plan, shard = task
    if not plan.ranges:
        return (plan, None)
    part = leave_out_stages.retrieve_shard(
        warehouse.connect,
        plan,
        shard,
        index_dir=warehouse.index_dir_path(),
        threads=warehouse.thread_count(),
    )
    context.log.info(f"Shard {shard} {plan.ranges[shard]}: {part.seconds:.2f} s")
    return (plan, part)


@dg.op(pool=DUCKDB_POOL, out=dg.Out(dg.Nothing))
def store_leave_out(
    context: dg.OpExecutionContext, warehouse: WarehouseResource, parts: list[Any]
) -> None:
    """Merge the shards (exactly the unsharded result), search the other spaces with the same
    groups, and store the leave-out list, the candidates and how each retrieval ran."""
    plan = parts[0][0]
    meta = leave_out_stages.store_leave_out(
        warehouse.connect,
        plan,
        [part for _, part in parts if part is not None],
        index_dir=warehouse.index_dir_path(),
        threads=warehouse.thread_count(),
    )
    meta["retrievals"] = dg.MetadataValue.json(meta["retrievals"])
    context.add_output_metadata(meta)


@dg.graph_asset(
    **FAMILY.options(
        "Per sampled record: the records held out of its evidence (itself and its "
        "group) and its retrieved neighbours in every space a variant uses (exact cosine "
        "top-k with the held-out records masked in the scan, or the approximate index with "
        "over-fetch). The TF-IDF search runs as `retrieve_shard` steps over record ranges. "
        "Rows in `leave_out`, `candidates` and `eval_retrievals`."
    ),
    ins={
        "holdout_sample": dg.AssetIn(dagster_type=dg.Nothing),
        "evidence_index": dg.AssetIn(dagster_type=dg.Nothing),
    },
    metadata=table_metadata("candidates", CANDIDATES_SCHEMA),
)
# Keyword-only: Dagster orders a graph asset's positional inputs as a set of their names, so
# the job's snapshot (and the UI's "same job?" check on Re-execute) depended on the process's
# string hash seed; keyword-only inputs come in the order of ``ins``.
def leave_out(*, holdout_sample: Any, evidence_index: Any) -> Any:
    shards = retrieval_shards(after=[holdout_sample, evidence_index])
    return store_leave_out(shards.map(retrieve_shard).collect())


@dg.op(ins={"after": dg.In(dg.Nothing)}, out=dg.DynamicOut(), pool=DUCKDB_POOL)
def classify_tasks(
    context: dg.OpExecutionContext, warehouse: WarehouseResource
) -> Iterator[dg.DynamicOutput[Any]]:
    """Fan out: one classify step per variant, each carrying everything it needs."""
    with warehouse.connect(read_only=True) as conn:
        tasks = holdout_classify.classify_tasks(
            conn, context.partition_key, warehouse=warehouse.warehouse_location()
        )
    for task in tasks:
        yield dg.DynamicOutput(task, mapping_key=task.variant.step_key)


@dg.op(retry_policy=dg.RetryPolicy(max_retries=2, delay=2))
def classify_variant(context: dg.OpExecutionContext, task: Any) -> Any:
    """Classify the shared sample with one variant's memo and config (no warehouse access,
    except a chat variant's call cache; its progress is logged as it goes)."""
    context.log.info(
        f"Classifying {len(task.records)} records with variant {task.variant.name!r} "
        f"({task.variant.config.classifier}, memo {task.memo_version})"
    )
    try:
        result = holdout_classify.classify_variant(task, log=context.log.info)
    except REFUSALS as error:
        raise refusal(error) from None
    except (KeyboardInterrupt, DagsterExecutionInterruptedError):
        if task.variant.config.classifier != CHAT_CLASSIFIER:
            raise
        # Dagster retries an interrupted step that has a retry policy: a chat step would start
        # its calls again after Terminate or Ctrl-C. The run is marked canceling (Terminate
        # has done so already) and the step fails without a retry; the answers received are
        # in the call cache, so re-executing pays only for the rest.
        run = context.instance.get_run_by_id(context.run_id)
        if run is not None and run.status in (
            dg.DagsterRunStatus.STARTING,
            dg.DagsterRunStatus.STARTED,
        ):
            context.instance.report_run_canceling(run, message="Interrupted during chat calls.")
        raise dg.Failure(
            description=f"variant {task.variant.name!r}: interrupted; the chat calls in flight "
            "were stopped and the answers received are cached (re-execute to pay for the rest)",
            allow_retries=False,
        ) from None
    context.log.info(f"Variant {task.variant.name!r} done in {result.usage['seconds']} s")
    return result


@dg.op(pool=DUCKDB_POOL, out=dg.Out(dg.Nothing))
def store_predictions(
    context: dg.OpExecutionContext,
    warehouse: WarehouseResource,
    io_manager: dg.ResourceParam[Any],
    results: list[Any],
) -> None:
    """Write every variant's predictions, replacing the evaluation's previous ones."""
    with warehouse.connect() as conn, transaction(conn):
        summary = holdout_classify.store_predictions(conn, context.partition_key, results)
    # The manager that carried the payloads removes them: nothing reads them again.
    io_manager.discard_run(context.run_id, context.instance)
    context.log.info(
        f"Stored {summary['rows']} predictions ({summary['failed_rows']} failed rows) for "
        f"variants {summary['variants']}"
    )


@dg.graph_asset(
    **FAMILY.options(
        "Each sampled record classified once per variant: one `classify_variant` step "
        "per variant, with its own logs and retries."
    ),
    ins={"leave_out": dg.AssetIn(dagster_type=dg.Nothing)},
    metadata=table_metadata("predictions", PREDICTIONS_SCHEMA),
)
def variant_predictions(leave_out: Any) -> Any:
    tasks = classify_tasks(after=leave_out)
    return store_predictions(tasks.map(classify_variant).collect())


@dg.asset(
    **FAMILY.options(
        "Per variant and tree level: accuracy (Wilson 95% and n), declines and the "
        "candidate ceiling; routing coverage."
    ),
    pool=DUCKDB_POOL,
    deps=[variant_predictions],
    metadata=table_metadata("variant_level_scores", VARIANT_LEVEL_SCORES_SCHEMA),
)
def variant_scores(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    with warehouse.connect() as conn, transaction(conn):
        levels = scores_stage(conn, context.partition_key)
    columns = [column.name for column in VARIANT_LEVEL_SCORES_DISPLAY.columns]
    records = [
        dg.TableRecord(
            {
                c: (INSUFFICIENT if row[c] is None else f"{row[c]:.4f}")
                if c.startswith("accuracy")
                else row[c]
                for c in columns
            }
        )
        for row in levels.to_dicts()
    ]
    return dg.MaterializeResult(
        metadata={
            "scores": dg.MetadataValue.table(records=records, schema=VARIANT_LEVEL_SCORES_DISPLAY)
        }
    )


def _comparisons_table(report: dict[str, Any]) -> dg.MetadataValue:
    """Each candidate against the baseline at each target level: difference, interval,
    verdict, MDE and p (the Holm-adjusted one with several candidates), and the pair's
    difference in cost per record when a variant calls a model (as the markdown words it)."""
    with_cost = any("cost" in comparison for comparison in report["comparisons"])
    records = []
    for comparison in report["comparisons"]:
        for depth in map(str, report["targetDepth"]):
            level = comparison["levels"][depth]
            interval = level["interval"]
            p = level.get("mcnemarPHolm", level["mcnemarP"])
            records.append(
                dg.TableRecord(
                    {
                        "candidate": comparison["candidate"],
                        "level": int(depth),
                        "pairs": level["pairs"],
                        "difference": level["difference"],
                        "interval": interval if interval == INSUFFICIENT else str(interval),
                        "verdict": level["verdict"],
                        "mde": level["minimumDetectableEffect"],
                        "p": p if p == INSUFFICIENT else float(p),
                        **(
                            {"cost": relative_cost_text(comparison.get("cost"))}
                            if with_cost
                            else {}
                        ),
                    }
                )
            )
    return dg.MetadataValue.table(
        records=records,
        schema=dg.TableSchema(
            columns=[
                dg.TableColumn("candidate", "string"),
                dg.TableColumn("level", "int"),
                dg.TableColumn("pairs", "int"),
                dg.TableColumn("difference", "float"),
                dg.TableColumn("interval", "string"),
                dg.TableColumn("verdict", "string"),
                dg.TableColumn("mde", "float"),
                dg.TableColumn("p", "float"),
                *([dg.TableColumn("cost", "string")] if with_cost else []),
            ]
        ),
    )


def _plot_metadata(report: dict[str, Any]) -> dict[str, Any]:
    """Numeric metadata plotted across evaluations. Each key carries what makes evaluations
    comparable (records and tree versions, grouping, target depth), so the UI never draws
    incomparable evaluations on one line."""
    metadata: dict[str, Any] = {}
    comparable = report["comparableAs"]
    for variant in report["variants"]:
        score = variant["score"]
        for depth, accuracy in score["targetDepth"].items():
            if isinstance(accuracy["value"], int | float):
                key = f"accuracy_L{depth}/{variant['name']} @ {comparable}"
                metadata[key] = shown(float(accuracy["value"]))
        decline = score["declineRate"]["value"]
        if isinstance(decline, int | float):
            metadata[f"decline_rate/{variant['name']} @ {comparable}"] = shown(float(decline))
        figure = (variant.get("cost") or {}).get("perRecord") or {}
        if isinstance(figure.get("value"), int | float):
            # Keyed by currency too (no exchange rate is applied), and never rounded to the
            # metadata's decimals: a cost per record can be 1e-7 of a currency unit.
            currency = variant["cost"]["currency"] or "currency not declared"
            key = f"cost_per_record/{variant['name']} @ {comparable} ({currency})"
            metadata[key] = float(figure["value"])
    return metadata


@dg.asset(
    **FAMILY.options(
        "With `--leakage-check`: the baseline scored again with only each record itself held "
        "out, compared level by level with the grouped baseline (how much grouping moved the "
        "score, with its paired interval). Without it, nothing is computed. Rows in "
        "`leakage_gaps`."
    ),
    deps=[variant_predictions],
    metadata=table_metadata("leakage_gaps", LEAKAGE_GAPS_SCHEMA),
)
def leakage_gap(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    meta = leakage_gap_stage(
        warehouse.connect,
        context.partition_key,
        index_dir=warehouse.index_dir_path(),
        threads=warehouse.thread_count(),
    )
    if "levels" in meta:
        meta["levels"] = dg.MetadataValue.json(json.loads(meta["levels"]))
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    **FAMILY.options(
        "The report: warnings, sample, versions, per-variant scores and paired "
        "comparisons with their intervals and verdicts, the A/A noise floor and the leakage "
        "gap when requested. Numeric metadata is keyed by what makes evaluations comparable, "
        "so plots never mix incomparable ones."
    ),
    pool=DUCKDB_POOL,
    deps=[variant_scores, leakage_gap],
    metadata=table_metadata("eval_reports", EVAL_REPORTS_SCHEMA),
)
def eval_report(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    with warehouse.connect() as conn, transaction(conn):
        report, markdown = report_stage(conn, context.partition_key, run_id=context.run_id)
    with_cost = shows_cost_per_record(report)  # as the markdown shows it
    rows = []
    for variant in report["variants"]:
        row: dict[str, Any] = {"variant": variant["name"]}
        for depth, accuracy in variant["score"]["targetDepth"].items():
            row[f"accuracy_L{depth}"] = accuracy["value"]
            row[f"n_L{depth}"] = accuracy["n"]
        row["decline_rate"] = variant["score"]["declineRate"]["value"]
        if with_cost:
            row["cost_per_record"] = cost_per_record_text(variant.get("cost"))
        rows.append(row)
    columns = list(rows[0]) if rows else ["variant"]
    text_columns = ("variant", "cost_per_record")
    metadata: dict[str, Any] = {
        "report": dg.MetadataValue.md(markdown),
        "warnings": dg.MetadataValue.json([w["code"] for w in report["warnings"]]),
        "sample_hash": report["sample"]["sampleHash"],
        "comparable_as": report["comparableAs"],
        "variants": dg.MetadataValue.table(
            records=[dg.TableRecord(shown(r)) for r in rows],
            schema=dg.TableSchema(
                columns=[
                    dg.TableColumn(c, "string" if c in text_columns else "float") for c in columns
                ]
            ),
        ),
        **_plot_metadata(report),
        "report_json": dg.MetadataValue.json(report),
    }
    if report["comparisons"]:
        metadata["comparisons"] = _comparisons_table(report)
    return dg.MaterializeResult(metadata=metadata)


holdout_assets = [
    eval_spec,
    holdout_sample,
    evidence_index,
    leave_out,
    variant_predictions,
    variant_scores,
    leakage_gap,
    eval_report,
]

holdout_eval_job = dg.define_asset_job(
    "holdout_eval",
    selection=dg.AssetSelection.assets(*holdout_assets),
    tags={KIND_TAG: "holdout"},
    description="Sample, leave out, classify per variant, score and report one holdout "
    "evaluation (its asset checks included).",
)
