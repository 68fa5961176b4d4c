"""The files `make demo`, the README and docs/ use are valid inputs (docs that match the code)."""

from __future__ import annotations

import json

import polars as pl
import yaml

from eval_pipelines.core.holdout.classify_config import parse_config
from eval_pipelines.core.holdout.memo import parse_memo_entry
from eval_pipelines.core.holdout.variants import parse_variants
from eval_pipelines.core.tree import tree_from_parent_links
from eval_pipelines_tests.helpers.paths import DEMO


def test_demo_variants_config_and_memo_entry_parse_against_the_demo_tree() -> None:
    tree = tree_from_parent_links(pl.read_parquet(DEMO / "icd10cm_tree.parquet"))
    entry = parse_memo_entry(yaml.safe_load((DEMO / "memo_pregnancy.yaml").read_text()), tree)
    assert entry.entry_id == "m_pregnancy_chapter" and entry.rule.codes == ("15",)
    config = parse_config(
        json.loads((DEMO / "config.json").read_text()), where="config", max_depth=tree.max_depth
    )
    assert config.target_depth == (3, 4)
    for name in ("variants.json", "variants_memo.json", "variants_embedding.json"):
        variants = parse_variants(
            json.loads((DEMO / name).read_text()),
            shared_config=config,
            pinned_target_depth=config.target_depth,
            known_memo_ids={entry.entry_id},
            max_depth=tree.max_depth,
        )
        assert len(variants) == 2 and variants[0].name == "baseline"


def test_demo_queries_run_on_the_demo_tables() -> None:
    """The queries `make demo` evaluates run on the data it loads (cars from vega_datasets,
    the ICD-10-CM records), as the CLI would run them, and the figures are sane."""
    from eval_pipelines.core.queries.engine import run_query
    from eval_pipelines.core.queries.query import parse_query
    from eval_pipelines.core.queries.source import Source
    from eval_pipelines.demo.tables import build_cars

    records = pl.read_parquet(DEMO / "icd10cm_records.parquet")
    sources = {
        "cars": Source("cars", "demo", "table", build_cars()),
        "icd10cm": Source("icd10cm", "demo", "case", records, key="record_key"),
    }
    results = {
        path.stem: run_query(parse_query(json.loads(path.read_text())), sources.__getitem__)
        for path in sorted((DEMO / "queries").glob("*.json"))
    }
    assert set(results) == {"cars_mpg", "cars_origin", "icd10cm_category"}
    assert results["cars_mpg"].result["maeGain"] > 0  # the evidence beats the training mean
    assert results["cars_origin"].result["tau"] is not None
    category = results["icd10cm_category"].result
    assert category["accuracy"] > category["baseAccuracy"] and category["n"] == 26105


def test_every_python_name_the_docs_give_exists() -> None:
    """Each `eval_pipelines.x.y` the README or a page of docs/ names in backticks imports (a
    module) or is an attribute of one (the README named
    `eval_pipelines.core.classify.register_classifier`, which did not exist)."""
    import importlib
    import re

    root = DEMO.parents[1]
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    from eval_pipelines.core.plugins import CLASSIFIER_GROUP, NODE_GROUP

    # Entry-point groups are spelled like modules but name no module (docs/plugins.md).
    groups = {CLASSIFIER_GROUP, NODE_GROUP}
    names = set(re.findall(r"`(eval_pipelines(?:\.\w+)+)", text)) - groups
    assert names
    missing = []
    for name in sorted(names):
        module_name, _, attribute = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError:
                missing.append(name)
                continue
            if not hasattr(module, attribute):
                missing.append(name)
    assert missing == []


def test_the_demo_plugin_variant_is_the_example_package_s_classifier() -> None:
    """``make demo``'s plug-in step evaluates the example package's ``most-similar`` (an
    entry point of the installed ``eval_pipelines_example``) against the built-in knn-vote."""
    from eval_pipelines.core.plugins import identity_of, resolve_classifier

    tree = tree_from_parent_links(pl.read_parquet(DEMO / "icd10cm_tree.parquet"))
    config = parse_config(
        json.loads((DEMO / "config.json").read_text()), where="config", max_depth=tree.max_depth
    )
    variants = parse_variants(
        json.loads((DEMO / "variants_plugin.json").read_text()),
        shared_config=config,
        pinned_target_depth=config.target_depth,
        known_memo_ids=set(),
        max_depth=tree.max_depth,
    )
    assert [v.config.classifier for v in variants] == ["knn-vote", "most-similar"]
    name = variants[1].config.classifier
    identity = identity_of(name, resolve_classifier(name)[1])
    assert identity["source"] == "entry point"
    assert identity["distribution"] == "eval_pipelines_example"
    assert identity["target"] == "eval_pipelines_example.classifiers:most_similar"
