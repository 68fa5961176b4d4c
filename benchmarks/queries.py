"""Benchmark evaluate queries (spec 003) on the 130k-record ICD-10-CM demo case: a 5-fold
sweep of ``predict category`` from ``text`` (every row tested once, each fold one model with
its test rows' counts subtracted), against refitting the model for each test row on a
subsample of fold 0 (the way a per-row hold-out would do it), with the probabilities of the
rows both score compared.

Run from the repository root::

    .venv/bin/python benchmarks/queries.py [--refit-rows 40] [--profile group]

Prints ``name: value`` lines. It calls the engine directly on the demo records file (the
same rows ``case create icd10cm`` stores), so the figures are the evaluation itself; the
``evaluate`` command adds a Dagster run's start-up (a few seconds in process).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl
from figures import line

from eval_pipelines.core.queries.deadline import Deadline
from eval_pipelines.core.queries.engine import run_folds, run_query
from eval_pipelines.core.queries.naive_bayes import NaiveBayes, class_counts, softmax
from eval_pipelines.core.queries.plan import Resolver, make_plan, scope_view
from eval_pipelines.core.queries.predict import PredictData, binding_values, prepare
from eval_pipelines.core.queries.query import parse_query
from eval_pipelines.core.queries.source import Source

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "data" / "demo" / "icd10cm_records.parquet"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refit-rows", type=int, default=40)
    parser.add_argument("--profile", default="group", choices=["fast", "group", "high"])
    args = parser.parse_args()
    frame = pl.read_parquet(RECORDS).select("record_key", "text", "category")
    source = Source("icd10cm", "demo", "case", frame, key="record_key")

    def resolve(name: str) -> Source:
        return source

    document = {
        "test": {"$index": {"$mod": [5, 0]}},
        "evaluate": {
            "from": "icd10cm",
            "where": {"text": {"$get": "text"}},
            "predict": "category",
            "config": {"ai": args.profile},
        },
        "select": ["n", "trainSamples", "accuracy", "baseAccuracy", "logLoss", "ece"],
        "maxTime": 3600,
    }
    query = parse_query(document)
    line("rows", frame.height)
    line("classes", frame["category"].n_unique())
    line("profile", args.profile)

    started = time.perf_counter()
    sweep = run_folds(query, resolve, folds=5)
    sweep_seconds = time.perf_counter() - started
    per_row = sweep_seconds / frame.height
    line("sweep_5_fold_seconds", sweep_seconds)
    line("sweep_rows_tested", sweep.result["coverage"]["tested"])
    line("sweep_every_row_once", sweep.result["coverage"]["everyRowOnce"])
    for name in ("accuracy", "baseAccuracy", "logLoss", "ece"):
        line(f"sweep_mean_{name}", float(sweep.result[name]))
    line("sweep_us_per_test_row", per_row * 1e6)

    # Fold 0 through the engine, with its cases, for the comparison below.
    with_cases = parse_query({**document, "select": ["n", "cases"]})
    cases = run_query(with_cases, resolve).result["cases"]

    # Per-row refit: for each of the first rows of fold 0, count the training rows again
    # and fit a model from those counts alone (features prepared once: generous to the refit).
    resolver = Resolver(resolve)
    scope = scope_view(query, resolver)
    plan = make_plan(query, resolver, scope)
    data = prepare(
        query, plan, binding_values(query, plan)[0], deadline=Deadline(3600, time.monotonic)
    )
    assert isinstance(data, PredictData)
    train = np.flatnonzero(plan.train_mask)
    grouped = args.profile != "fast"
    index = {value: i for i, value in enumerate(data.classes)}
    matched = 0
    started = time.perf_counter()
    for case in cases[: args.refit_rows]:
        row = case["offset"]
        model = NaiveBayes(
            class_counts(data.scope_targets[train], data.scope_features.counts[train])
        )
        counts = data.scope_features.counts[row : row + 1]
        scores = model.log_scores(
            data.scope_features.weighted[row : row + 1], counts if grouped else None
        )
        probabilities = softmax(scores)[0]
        top = int(probabilities.argmax())
        correct = index[case["correct"]["$value"]]
        same = (
            data.classes[top] == case["top"]["$value"]
            and abs(probabilities[top] - case["top"]["$p"]) < 1e-12
            and abs(probabilities[correct] - case["correct"]["$p"]) < 1e-12
        )
        matched += same
    refit_seconds = (time.perf_counter() - started) / args.refit_rows
    line("refit_rows", args.refit_rows)
    line("refit_seconds_per_test_row", refit_seconds)
    line("refit_rows_identical_probabilities", f"{matched}/{args.refit_rows}")
    line("speedup_per_test_row", refit_seconds / per_row)


if __name__ == "__main__":
    main()
