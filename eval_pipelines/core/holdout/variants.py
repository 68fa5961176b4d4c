"""An evaluation's variants: one classify job each over the shared sample, the first the
baseline; their names, memo entries, configs and Dagster step keys."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.classify_config import (
    ClassifyConfig,
    config_from_json,
    parse_config,
)
from eval_pipelines.core.inputs import check_name

# Each variant is one classify job and one Dagster step over the sample, and every candidate
# is compared with the baseline and Holm-adjusted across the candidates (docs/usage.md,
# "Rules every command follows").
VARIANTS_MAX = 20
AA_TWIN = "aa-twin"


@dataclass(frozen=True)
class Variant:
    """One classify job over the shared sample; the first variant is the baseline."""

    name: str
    memo_include: tuple[str, ...]
    config: ClassifyConfig
    step_key: str
    # The plug-in classifier's identity (core.plugins.identity_of); None for a registered one.
    plugin: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "memoInclude": list(self.memo_include),
            "config": self.config.to_json(),
            "stepKey": self.step_key,
        }
        # Written only for plug-ins, so specs of built-in classifiers read as before.
        if self.plugin is not None:
            data["plugin"] = dict(self.plugin)
        return data


def step_key_for(name: str, taken: set[str]) -> str:
    """A Dagster mapping key (``[A-Za-z0-9_]``) for a variant name, unique within the eval."""
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "variant"
    key, suffix = base, 2
    while key in taken:
        key, suffix = f"{base}_{suffix}", suffix + 1
    taken.add(key)
    return key


def parse_variants(
    raw: Any,
    *,
    shared_config: ClassifyConfig,
    pinned_target_depth: tuple[int, ...],
    known_memo_ids: set[str],
    max_depth: int,
    n_records: int | None = None,
    n_queries: int | None = None,
) -> tuple[Variant, ...]:
    """Parse ``variants.json``: a non-empty list of ``{"name", "memo_include"?, "config"?}``.

    A variant's config replaces the shared config when present; the target depth is pinned per
    evaluation, so a variant that names a different one is an error.
    """
    if not isinstance(raw, list) or not raw:
        raise InputError("variants", raw, "give at least one variant (the first is the baseline)")
    if len(raw) > VARIANTS_MAX:
        raise InputError(
            "variants",
            f"{len(raw)} variants",
            f"give at most {VARIANTS_MAX}: each is a classify job over the whole sample, and "
            "more candidates dilute the Holm-adjusted comparisons; split into evaluations "
            "with the same seed and compare them",
        )
    variants: list[Variant] = []
    names: set[str] = set()
    step_keys: set[str] = set()
    for index, item in enumerate(raw):
        where = f"variants[{index}]"
        if not isinstance(item, dict):
            raise InputError(where, item, 'each variant is an object {"name", ...}')
        unknown = set(item) - {"name", "memo_include", "memoInclude", "config"}
        if unknown:
            raise InputError(
                f"{where}.{sorted(unknown)[0]}",
                item[sorted(unknown)[0]],
                "unknown variant key; known keys: name, memo_include, config",
            )
        name = check_name(item.get("name"), f"{where}.name", "a variant name")
        if name in names:
            raise InputError(f"{where}.name", name, "variant names must be unique")
        names.add(name)
        if "memo_include" in item and "memoInclude" in item:
            raise InputError(f"{where}.memo_include", item["memo_include"], "give it once")
        include = item.get("memo_include", item.get("memoInclude", []))
        if not isinstance(include, list) or not all(isinstance(m, str) for m in include):
            raise InputError(f"{where}.memo_include", include, "must be a list of memo entry ids")
        for memo_id in include:
            if memo_id not in known_memo_ids:
                raise InputError(
                    f"{where}.memo_include", memo_id, "is not a memo entry of this case"
                )
        if "config" in item:
            config = parse_config(
                item["config"],
                where=f"{where}.config",
                max_depth=max_depth,
                n_records=n_records,
                n_queries=n_queries,
            )
            if config.target_depth and config.target_depth != pinned_target_depth:
                raise InputError(
                    f"{where}.config.targetDepth",
                    list(config.target_depth),
                    f"the evaluation pins targetDepth {list(pinned_target_depth)} for every "
                    "variant; set it in the shared config",
                )
        else:
            config = shared_config
        config = replace(config, target_depth=pinned_target_depth)
        variants.append(
            Variant(
                name=name,
                memo_include=tuple(dict.fromkeys(include)),
                config=config,
                step_key=step_key_for(name, step_keys),
            )
        )
    return tuple(variants)


def variant_from_json(raw: dict[str, Any]) -> Variant:
    """Rebuild a stored variant (already validated when it was written)."""
    return Variant(
        name=raw["name"],
        memo_include=tuple(raw["memoInclude"]),
        config=config_from_json(raw["config"]),
        step_key=raw["stepKey"],
        plugin=raw.get("plugin"),
    )
