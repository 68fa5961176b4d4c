"""Classify workflows: pinning a case's versions and memo into a revision, golden cases from
labelled records, and running the classify node over them with their groups held out.

A golden case of a classify workflow is a labelled record of the case; its label is the
record's code at the shallowest target depth, and the prediction is scored at that depth.
The record's own group (near-duplicates, or the records sharing its group field) is held out
of its evidence, exactly as in a holdout evaluation.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.hashing import hash_json
from eval_pipelines.core.holdout.classify import (
    RecordToClassify,
    get_classifier,
    neighbours_from_frame,
)
from eval_pipelines.core.holdout.classify_config import parse_config
from eval_pipelines.core.holdout.memo import memo_version_of, parse_memo_entry
from eval_pipelines.core.holdout.sampling import draw_sample
from eval_pipelines.core.workflows.classify_node import grouping_config
from eval_pipelines.core.workflows.definition import Workflow, workflow_from_content
from eval_pipelines.core.workflows.execute import CachedStep, CacheKey, Execution
from eval_pipelines.core.workflows.nodes import Document
from eval_pipelines.stages.holdout_classify import evidence_frame
from eval_pipelines.stages.text_index import load_or_build_index
from eval_pipelines.storage import cases as cases_store
from eval_pipelines.storage import memo as memo_store

RECORD_MEDIA_TYPE = "record"


def pin_workflow(conn: duckdb.DuckDBPyConnection, workflow: Workflow) -> Workflow:
    """A classify workflow with its case's current records and tree versions, target depth
    and active memo entries folded into the node (an extract workflow is returned as is)."""
    if workflow.kind != "classify":
        return workflow
    node = workflow.nodes[0]
    case_id = node.config["case"]
    info = cases_store.load_case(conn, case_id)
    max_depth = cases_store.tree_depth(conn, case_id, info.tree_version)
    config = parse_config(node.config["config"], where="nodes[0].config", max_depth=max_depth)
    grouping = grouping_config(node.config, "nodes[0]")
    if grouping.field is not None and grouping.field not in info.metadata_columns:
        raise InputError(
            "nodes[0].grouping.field",
            grouping.field,
            f"case {case_id} has no such metadata column ({', '.join(info.metadata_columns)})",
        )
    active = [
        content
        for _, (status, content) in sorted(memo_store.entry_contents(conn, case_id).items())
        if status == "active"
    ]
    content = copy.deepcopy(workflow.content)
    content["nodes"][0]["config"]["pinned"] = {
        "recordsVersion": info.records_version,
        "treeVersion": info.tree_version,
        "targetDepth": list(config.target_depth or info.target_depth),
        "memoVersion": memo_version_of(active),
        "memoEntries": active,
    }
    return workflow_from_content(workflow.name, content)


def record_document(record_key: str, text: str) -> tuple[bytes, Document]:
    """A labelled record as a stored document (its id covers the key: two records with the
    same text are two cases)."""
    content = json.dumps({"record_key": record_key, "text": text}, sort_keys=True).encode()
    return content, Document(hash_json([record_key, text]), record_key, RECORD_MEDIA_TYPE, text)


def golden_records(
    conn: duckdb.DuckDBPyConnection,
    workflow: Workflow,
    *,
    keys: list[str] | None,
    sample_size: int | None,
    seed: int,
) -> list[tuple[bytes, Document, dict[str, Any]]]:
    """Labelled records for golden cases: the named ones, or a seeded sample; each with its
    label (the code at the shallowest target depth)."""
    pinned = workflow.nodes[0].config["pinned"]
    case_id = workflow.nodes[0].config["case"]
    records = cases_store.load_records(conn, case_id, pinned["recordsVersion"])
    tree = cases_store.load_tree(conn, case_id, pinned["treeVersion"])
    depth = min(pinned["targetDepth"])
    by_key = {row["record_key"]: row for row in records.iter_rows(named=True)}
    if keys is None:
        if sample_size is None:
            raise InputError("records", None, "name record keys (`records`) or a `sample_size`")
        keys = list(draw_sample(sorted(by_key), sample_size, seed=seed).keys)
    chosen = []
    for key in keys:
        row = by_key.get(key)
        if row is None:
            raise InputError("records", key, f"no such record in case {case_id}")
        code = tree.ancestor_at(row["label_node"], depth)
        if code is None:
            raise InputError("records", key, f"its label has no ancestor at depth {depth}")
        content, document = record_document(key, row["text"])
        chosen.append((content, document, {"code": code}))
    return chosen


def classify_executions(
    conn_factory: Any,
    workflow: Workflow,
    documents: dict[str, Document],
    cache: dict[CacheKey, CachedStep],
    *,
    index_dir: Path,
    threads: int,
) -> dict[str, Execution]:
    """Run the classify node over the golden records (cached ones are served from the
    cache): retrieve each record's evidence with its group held out, then vote."""
    from eval_pipelines.core.holdout.grouping import compute_leave_out

    node = workflow.nodes[0]
    executions: dict[str, Execution] = {}
    todo = []
    for document_id, document in documents.items():
        key = (document_id, node.id, node.chain_hash)
        cached = cache.get(key)
        if isinstance(cached, dict):  # the vote never fails a step, so never caches one
            executions[document_id] = Execution(
                document_id, workflow.revision, {node.id: cached}, None, 0, 1, 0.0
            )
        else:
            todo.append(document)
    if not todo:
        return executions
    pinned = node.config["pinned"]
    case_id = node.config["case"]
    with conn_factory(read_only=True) as conn:
        records = cases_store.load_records(conn, case_id, pinned["recordsVersion"])
        tree = cases_store.load_tree(conn, case_id, pinned["treeVersion"])
    config = replace(
        parse_config(node.config["config"], where="config", max_depth=tree.max_depth),
        target_depth=tuple(pinned["targetDepth"]),
    )
    record_keys = records.get_column("record_key").to_list()
    handle = load_or_build_index(
        index_dir, case_id, pinned["recordsVersion"], records.get_column("text").to_list()
    )
    position_of = {key: i for i, key in enumerate(record_keys)}
    positions = np.array([position_of[d.name] for d in todo], dtype=np.int64)
    leave_out = compute_leave_out(
        handle.index,
        record_keys,
        records.get_column("metadata").to_list(),
        positions,
        grouping_config(node.config, "nodes[0]"),
        candidates=config.candidates,
        n_threads=threads,
    )
    label_of = dict(zip(record_keys, records.get_column("label_node").to_list(), strict=True))
    neighbours = neighbours_from_frame(evidence_frame(leave_out.candidates, label_of))
    entries = [parse_memo_entry(raw, tree) for raw in pinned["memoEntries"]]
    metadata_of = dict(zip(record_keys, records.get_column("metadata").to_list(), strict=True))
    to_classify = [
        RecordToClassify(d.name, d.text, json.loads(metadata_of[d.name] or "{}")) for d in todo
    ]
    predictions = get_classifier(config.classifier)(
        to_classify, neighbours, entries, config, tree=tree
    )
    # A plug-in may return its predictions in any order: each is matched to its record by
    # key, and predictions for other records than those asked for are refused.
    by_key = {prediction.record_key: prediction for prediction in predictions}
    if sorted(by_key) != sorted(d.name for d in todo) or len(predictions) != len(todo):
        raise RuntimeError(
            f"classifier {config.classifier!r} returned predictions for other records than "
            f"the {len(todo)} golden records it was given"
        )
    depth = min(config.target_depth)
    for document in todo:
        prediction = by_key[document.name]
        output = {"code": tree.ancestor_at(prediction.code, depth) if prediction.code else None}
        key = (document.document_id, node.id, node.chain_hash)
        executions[document.document_id] = Execution(
            document.document_id,
            workflow.revision,
            {node.id: output},
            None,
            1,
            0,
            node.cost,
            {key: output},
        )
    return executions


def repin_classify_workflows(
    conn: duckdb.DuckDBPyConnection, case_id: str, *, source: str
) -> dict[str, str]:
    """Save a new revision of every classify workflow on ``case_id`` whose newest revision
    pins other versions or memo entries than the case now has; returns ``{workflow:
    revision}`` of the revisions saved."""
    from eval_pipelines.storage import workflows as workflows_store

    saved = {}
    for name in workflows_store.workflow_names(conn):
        newest = workflows_store.revisions_of(conn, name)[0]
        if newest.kind != "classify":
            continue
        workflow = workflows_store.load_revision(conn, newest.revision)
        if workflow.nodes[0].config["case"] != case_id:
            continue
        repinned = pin_workflow(conn, workflow)
        if repinned.revision != workflow.revision:
            workflows_store.save_revision(conn, repinned, source=source, saved_by=None)
            saved[name] = repinned.revision
    return saved
