"""The query documents spec 003 gives as examples, as written there, and the core's base
query over a products table (one of them): each must parse, and each evaluated over the
spec's tables answers what the spec says."""

from __future__ import annotations

from typing import Any

BASE: dict[str, Any] = {
    "test": {"$index": {"$mod": [5, 0]}},
    "evaluate": {
        "from": "products",
        "where": {"name": {"$get": "name"}},
        "predict": "category",
    },
    "select": ["accuracy", "baseAccuracy", "meanRank", "n"],
}


# The request examples of spec 003, as written there.
SPEC_EXAMPLES = [
    {
        "test": {"$index": {"$mod": [5, 0]}},
        "evaluate": {
            "from": "sales",
            "where": {"store": {"$get": "store"}, "week": {"$get": "week"}},
            "estimate": "units",
        },
        "select": ["n", "mae", "rmse", "r2", "baselineMae", "maeGain"],
    },
    BASE,
    {
        "test": {"fold": 0},
        "evaluate": {
            "from": {"from": "invoices", "where": {"tenant": "A"}},
            "where": {"vendor": {"$get": "vendor"}, "description": {"$get": "description"}},
            "predict": "gl",
        },
        "select": ["accuracy", "baseAccuracy", "n", "trainSamples"],
    },
    {
        "test": {"$index": {"$mod": [3, 0]}},
        "evaluate": {
            "from": "products",
            "where": {"name": {"$get": "name"}},
            "predict": "tags.$feature",
        },
        "select": ["n", "accuracy", "baseAccuracy", "meanRank"],
    },
    {
        "test": {"$index": {"$mod": [5, 0]}},
        "evaluate": {
            "from": "products",
            "where": {"name": {"$get": "name"}},
            "predict": "category",
        },
        "select": ["accuracy", "errorCases"],
    },
    {
        "test": {"$index": {"$mod": [5, 0]}},
        "evaluate": {
            "from": "purchases",
            "where": {"supplier": {"$get": "supplier"}},
            "predict": "cost_center",
            "config": {"ai": "high", "calibrate": True},
        },
    },
    {
        "test": {"$and": [{"$index": {"$mod": [3, 0]}}, {"promo": True}]},
        "evaluate": {"from": "sales", "where": {"name": {"$get": "name"}}, "predict": "cat"},
    },
    {
        "testSource": {"where": {"month": {"$lte": "2024-07"}}},
        "evaluate": {"from": "sales", "where": {"name": {"$get": "name"}}, "predict": "cat"},
    },
    {
        "testSource": {"from": "holdout", "limit": 200},
        "evaluate": {"from": "sales", "where": {"name": {"$get": "name"}}, "predict": "cat"},
    },
    {
        "test": {"$or": [{"$index": 0}, {"$index": 1}, {"$index": 2}]},
        "evaluate": {
            "from": "orders",
            "where": {"product.pet_type": {"$get": "product.pet_type"}},
            "predict": "channel",
        },
    },
]
