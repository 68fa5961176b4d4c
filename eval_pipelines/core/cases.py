"""Building a case: labelled records and their code tree, validated and versioned.

A pure function of the frames read from the user's files (:func:`build_case`); the API reads
the files and writes the result in one transaction. The records version hashes the records'
key, text, label and metadata; the tree version its mode, prefix lengths and parent links, so
two loads of the same files give the same versions and an evaluation can say what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import polars as pl

from eval_pipelines.core.embeddings.vectors import check_embeddings
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.hashing import hash_frame, hash_json
from eval_pipelines.core.holdout.spec import parse_target_depth, validate_case_id
from eval_pipelines.core.records import check_labels_in_tree, metadata_keys, normalise_records
from eval_pipelines.core.tree import CodeTree, tree_from_parent_links, tree_from_prefix_levels

TREE_NODE_SCHEMA = {
    "code": pl.String,
    "parent": pl.String,
    "depth": pl.Int32,
    "title": pl.String,
    "kind": pl.String,
}


@dataclass(frozen=True)
class BuiltCase:
    """A validated case, ready to be stored.

    Attributes
    ----------
    records
        The normalised records (``record_key``, ``text``, ``label``, ``metadata``).
    nodes
        The tree's rows (:data:`TREE_NODE_SCHEMA`), by code.
    tree
        The code tree the labels were checked against.
    target_depth
        The levels scored as the target.
    records_version, tree_version
        Content hashes of the records and of the tree's structure.
    metadata_columns
        The records' metadata keys, sorted.
    embedding_keys, embeddings
        The records' own embeddings (normalised, in ``embedding_keys`` order: the sorted
        record keys) when some were given, else ``()`` and ``None``.
    """

    case_id: str
    records: pl.DataFrame
    nodes: pl.DataFrame
    tree: CodeTree
    target_depth: tuple[int, ...]
    records_version: str
    tree_version: str
    metadata_columns: tuple[str, ...]
    embedding_keys: tuple[str, ...] = ()
    embeddings: npt.NDArray[np.float32] | None = None


def build_case(
    case_id: str,
    records: pl.DataFrame,
    *,
    tree_frame: pl.DataFrame | None = None,
    levels: Sequence[int] | None = None,
    key_column: str = "record_key",
    text_column: str = "text",
    label_column: str = "label",
    target_depth: Sequence[int] | None = None,
    embedded: tuple[Sequence[str], npt.ArrayLike | pl.Series] | None = None,
) -> BuiltCase:
    """Validate a case's records against its tree and version both.

    Parameters
    ----------
    case_id
        The case's name (the documented name pattern).
    records
        The records file as read, with the embedding column (if any) already taken out.
    tree_frame, levels
        Exactly one: a tree file (``code``, ``parent``, optional ``title`` and ``kind``), or
        the prefix lengths of a prefix tree built from the labels.
    key_column, text_column, label_column
        The records' columns.
    target_depth
        The levels scored as the target; the tree's deepest level when ``None``.
    embedded
        The records' own embeddings as ``(keys, vectors)``, checked against the records.

    Raises
    ------
    InputError
        Naming the field, the value and the rule, for anything that does not validate.
    """
    validate_case_id(case_id)
    if (tree_frame is None) == (levels is None):
        raise InputError("--tree/--levels", None, "give exactly one of --tree or --levels")
    normalised = normalise_records(
        records, key_column=key_column, text_column=text_column, label_column=label_column
    )
    if tree_frame is not None:
        tree = tree_from_parent_links(tree_frame)
        nodes = tree_nodes(
            tree, _column_by_code(tree_frame, "title"), _column_by_code(tree_frame, "kind")
        )
    else:
        assert levels is not None
        tree = tree_from_prefix_levels(
            normalised.get_column("label").unique().to_list(), list(levels)
        )
        nodes = tree_nodes(tree, {}, {})
    normalised = check_labels_in_tree(normalised, tree)
    depth = parse_target_depth(
        list(target_depth) if target_depth is not None else [tree.max_depth],
        "--target-depth",
        tree.max_depth,
    )
    tree_version = hash_json(
        {
            "mode": tree.mode,
            "levels": list(tree.prefix_lengths),
            "nodes": hash_frame(nodes.select("code", "parent")),
        }
    )
    keys: tuple[str, ...] = ()
    vectors = None
    if embedded is not None:
        keys = tuple(sorted(normalised.get_column("record_key").to_list()))
        vectors = check_embeddings(keys, *embedded)
    return BuiltCase(
        case_id=case_id,
        records=normalised,
        nodes=nodes,
        tree=tree,
        target_depth=depth,
        records_version=hash_frame(normalised.select("record_key", "text", "label", "metadata")),
        tree_version=tree_version,
        metadata_columns=tuple(sorted(metadata_keys(normalised))),
        embedding_keys=keys,
        embeddings=vectors,
    )


def tree_nodes(
    tree: CodeTree, titles: dict[str, str | None], kinds: dict[str, str | None]
) -> pl.DataFrame:
    """Rows for ``tree_nodes``; prefix trees take their level name as the kind."""
    codes = sorted(tree.paths)
    level_names = {level.depth: level.name for level in tree.levels}
    return pl.DataFrame(
        {
            "code": codes,
            "parent": [tree.paths[c][-2] if len(tree.paths[c]) > 1 else None for c in codes],
            "depth": [len(tree.paths[c]) for c in codes],
            "title": [titles.get(c) for c in codes],
            "kind": [
                level_names[len(tree.paths[c])] if tree.mode == "prefix" else kinds.get(c)
                for c in codes
            ],
        },
        schema=TREE_NODE_SCHEMA,
    )


def _column_by_code(tree_frame: pl.DataFrame, column: str) -> dict[str, str | None]:
    """An optional tree-file column as ``code -> value`` (empty when the file lacks it)."""
    if column not in tree_frame.columns:
        return {}
    codes = tree_frame["code"].cast(pl.String).to_list()
    return dict(zip(codes, tree_frame[column].cast(pl.String).to_list(), strict=True))
