"""The files `make demo` and the README use are valid inputs (docs that match the code)."""

from __future__ import annotations

import json

import polars as pl
import yaml

from eval_pipelines.core.holdout.memo import parse_memo_entry
from eval_pipelines.core.holdout.spec import parse_config, parse_variants
from eval_pipelines.core.tree import tree_from_parent_links
from eval_pipelines_tests.conftest import DEMO


def test_demo_variants_config_and_memo_entry_parse_against_the_demo_tree() -> None:
    tree = tree_from_parent_links(pl.read_parquet(DEMO / "icd10cm_tree.parquet"))
    entry = parse_memo_entry(yaml.safe_load((DEMO / "memo_pregnancy.yaml").read_text()), tree)
    assert entry.entry_id == "m_pregnancy_chapter" and entry.rule.codes == ("15",)
    config = parse_config(
        json.loads((DEMO / "config.json").read_text()), where="config", max_depth=tree.max_depth
    )
    assert config.target_depth == (3, 4)
    for name in ("variants.json", "variants_memo.json"):
        variants = parse_variants(
            json.loads((DEMO / name).read_text()),
            shared_config=config,
            pinned_target_depth=config.target_depth,
            known_memo_ids={entry.entry_id},
            max_depth=tree.max_depth,
        )
        assert len(variants) == 2 and variants[0].name == "baseline"
