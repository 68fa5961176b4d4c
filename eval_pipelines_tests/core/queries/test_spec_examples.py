"""The request examples of spec 003 run as written, on tables shaped like the ones they name,
and answer with exactly the keys they select (plus ``message`` when there is something to
say, and ``tau`` when a temperature was fitted)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from eval_pipelines.core.queries.engine import run_folds, run_query
from eval_pipelines.core.queries.query import PREDICT_METRICS, parse_query
from eval_pipelines.core.queries.source import Source
from eval_pipelines_tests.helpers.query_spec_examples import SPEC_EXAMPLES

rng = np.random.default_rng(3)
N = 240
KINDS = ["food", "pets", "tools"]
WORDS = {"food": ["sugar", "flour", "salt"], "pets": ["leash", "bowl", "treat"], "tools": ["saw"]}


def _names(categories: list[str]) -> list[str]:
    return [" ".join(rng.choice(WORDS[c], size=2).tolist() + ["pack"]) for c in categories]


CATEGORIES = rng.choice(KINDS, size=N).tolist()
TABLES = {
    "products": pl.DataFrame(
        {
            "sku": [f"s{i}" for i in range(N)],
            "name": _names(CATEGORIES),
            "category": CATEGORIES,
            "tags": [[c, "sale"] if i % 4 == 0 else [c] for i, c in enumerate(CATEGORIES)],
            "pet_type": ["cat" if i % 2 else "dog" for i in range(N)],
        }
    ),
    "sales": pl.DataFrame(
        {
            "store": rng.choice(["north", "south"], size=N).tolist(),
            "week": rng.integers(1, 10, size=N).tolist(),
            "units": rng.poisson(20, size=N).astype(float).tolist(),
            "promo": (np.arange(N) % 2 == 0).tolist(),
            "month": [f"2024-{1 + i % 12:02d}" for i in range(N)],
            "name": _names(CATEGORIES),
            "cat": CATEGORIES,
        }
    ),
    "invoices": pl.DataFrame(
        {
            "tenant": ["A" if i % 3 else "B" for i in range(N)],
            "fold": (np.arange(N) % 5).tolist(),
            "vendor": rng.choice(["acme", "globex", "initech"], size=N).tolist(),
            "description": _names(CATEGORIES),
            "gl": CATEGORIES,
        }
    ),
    "purchases": pl.DataFrame(
        {
            "supplier": rng.choice(["acme", "globex", "initech", "umbrella"], size=N).tolist(),
            "cost_center": rng.choice(["cc1", "cc2"], size=N).tolist(),
        }
    ),
    "messages": pl.DataFrame({"message": _names(CATEGORIES), "operation": CATEGORIES}),
    "orders": pl.DataFrame(
        {
            "product": [f"s{i % 20}" for i in range(N)],
            "channel": ["web" if (i % 20) % 2 else "shop" for i in range(N)],
        }
    ),
}
TABLES["holdout"] = TABLES["sales"].head(60)
SOURCES = {
    name: Source(
        name,
        "v1",
        "table",
        frame,
        key="sku" if name == "products" else None,
        links={"product": "products"} if name == "orders" else {},
    )
    for name, frame in TABLES.items()
}
FIVE_FOLD = {
    "test": {"$index": {"$mod": [5, 0]}},
    "evaluate": {
        "from": "messages",
        "where": {"message": {"$get": "message"}},
        "predict": "operation",
    },
    "select": ["n", "trainSamples", "accuracy", "baseAccuracy", "meanRank", "logLoss", "ece"],
}
EXTRA = {"message", "tau"}


@pytest.mark.parametrize("document", [*SPEC_EXAMPLES, FIVE_FOLD], ids=range(len(SPEC_EXAMPLES) + 1))
def test_each_003_example_answers_with_the_keys_it_selects(document: dict[str, Any]) -> None:
    query = parse_query(document)
    result = run_query(query, SOURCES.__getitem__).result
    selected = set(document.get("select") or [m for m in PREDICT_METRICS if m != "tau"])
    assert selected <= set(result)
    assert set(result) - selected <= EXTRA
    assert result.get("n", 1) > 0


def test_the_worked_example_sweeps_five_folds() -> None:
    outcome = run_folds(parse_query(FIVE_FOLD), SOURCES.__getitem__, folds=5)
    assert [f["n"] for f in outcome.result["folds"]] == [48] * 5
    assert outcome.result["coverage"]["everyRowOnce"]
    assert outcome.result["accuracy"] > outcome.result["baseAccuracy"]
