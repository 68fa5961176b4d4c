"""The ``classify`` node of a classify workflow: a case's classification setup (classifier
config, memo version, tree) whose output field is ``code``.

Preparing checks the config the way a holdout variant's config is checked. The case's
versions and memo entries are pinned into the configuration when the revision is saved (a
warehouse read, so the API does it, see :func:`pin`): an approved memo entry therefore makes
a new revision, which the gate must pass. The node runs in batches over labelled records
(retrieval is vectorised), not document by document.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.holdout.classify import known_classifiers
from eval_pipelines.core.holdout.classify_config import CHAT_CLASSIFIER, parse_config
from eval_pipelines.core.holdout.grouping_settings import parse_grouping
from eval_pipelines.core.holdout.spec import validate_case_id
from eval_pipelines.core.plugins import PluginError, identity_of, resolve_classifier
from eval_pipelines.core.workflows.nodes import Document, NodeFailed, reject_unknown_keys

CONFIG_KEYS = ("case", "config", "grouping", "pinned")
# The identity of a plug-in classifier, pinned into the node when the revision is saved.
CLASSIFIER_PLUGIN = "classifierPlugin"
# Target depth is checked against the case's tree when the revision is pinned.
UNCHECKED_DEPTH = 64


class ClassifyNode:
    def prepare(self, config: dict[str, Any], where: str, base_dir: Path) -> dict[str, Any]:
        reject_unknown_keys(config, CONFIG_KEYS, where)
        validate_case_id(config.get("case"))  # type: ignore[arg-type]
        classify = parse_config(
            config.get("config"), where=f"{where}.config", max_depth=UNCHECKED_DEPTH
        )
        plugin = classifier_identity(classify.classifier, f"{where}.config.classifier")
        grouping_config(config, where)
        return {
            "case": config["case"],
            "config": config.get("config") or {},
            "grouping": config.get("grouping") or {"mode": "nearDuplicate"},
            **({"pinned": config["pinned"]} if "pinned" in config else {}),
            **({CLASSIFIER_PLUGIN: plugin} if plugin is not None else {}),
        }

    def run(
        self, config: dict[str, Any], document: Document, upstream: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, Any]:
        raise NodeFailed("a classify node runs over a case's records, not over a document")


def classifier_identity(name: str, field: str) -> dict[str, str] | None:
    """None for a registered classifier; a plug-in's identity (core.plugins) once it is
    resolved and checked, so a classifier that cannot run is refused when the workflow is
    saved, not when its gate runs."""
    if name in known_classifiers():
        return None
    if name == CHAT_CLASSIFIER:
        raise InputError(
            field,
            name,
            "the chat classifier runs in holdout evaluations only (eval holdout); a classify "
            "workflow cannot call a model yet: use knn-vote or a plug-in",
        )
    try:
        _, found = resolve_classifier(name)
    except PluginError as error:
        raise InputError(
            field, name, f"registered: {', '.join(known_classifiers())}, or a plug-in: {error}"
        ) from None
    return identity_of(name, found)


def grouping_config(config: dict[str, Any], where: str) -> Any:
    """The grouping that keeps a golden record's own group out of its evidence (000's
    ``grouping``: ``nearDuplicate`` by default, ``field`` with ``field``, or ``none``)."""
    raw = config.get("grouping") or {}
    if not isinstance(raw, dict):
        raise InputError(f"{where}.grouping", raw, "must be a mapping with 'mode'")
    reject_unknown_keys(raw, ("mode", "threshold", "field"), f"{where}.grouping")
    return parse_grouping(raw.get("mode"), raw.get("threshold"), raw.get("field"))
