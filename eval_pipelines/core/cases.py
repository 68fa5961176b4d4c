"""Building a case: labelled records and their code tree, validated and versioned.

:func:`build_case` is the one place a case's arguments are checked: every argument first
(the case id, exactly one of a tree file or prefix lengths, at most one source of
embeddings, the column names, the shape of the target depth), before any file is read; then
the files are read and their contents validated. The API writes the result in one
transaction. The records version hashes the records' key, text, label and metadata; the tree
version its mode, prefix lengths and parent links, so two loads of the same files give the
same versions and an evaluation can say what changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from eval_pipelines.core.embeddings.vectors import (
    check_embeddings,
    embeddings_from_frame,
    read_embeddings_file,
)
from eval_pipelines.core.errors import InputError
from eval_pipelines.core.hashing import hash_frame, hash_json
from eval_pipelines.core.holdout.classify_config import parse_target_depth
from eval_pipelines.core.holdout.spec import validate_case_id
from eval_pipelines.core.records import (
    check_labels_in_tree,
    metadata_keys,
    normalise_records,
    read_table,
)
from eval_pipelines.core.tree import (
    CodeTree,
    check_prefix_lengths,
    tree_from_parent_links,
    tree_from_prefix_levels,
)

_DEFAULT_COLUMNS = {"key_column": "record_key", "text_column": "text", "label_column": "label"}

TREE_NODE_SCHEMA = {
    "code": pl.String,
    "parent": pl.String,
    "depth": pl.Int32,
    "title": pl.String,
    "kind": pl.String,
}


@dataclass(frozen=True)
class CaseSource:
    """What a case is loaded from: the one list of :func:`build_case`'s and the API's
    ``create_case``'s arguments, checked by :func:`check_case_arguments` (nothing here).

    Attributes
    ----------
    records_path
        The records file: Parquet, CSV or JSON Lines.
    tree_path, levels
        Exactly one: a tree file (``code``, ``parent``, optional ``title`` and ``kind``), or
        the prefix lengths of a prefix tree built from the labels.
    key_column, text_column, label_column
        The records' columns (three different ones).
    target_depth
        The levels scored as the target; the tree's deepest level when ``None``.
    embeddings_path, embedding_column
        At most one: a Parquet file of ``record_key`` and one vector column, or a vector
        column of the records file: the records' own embeddings, checked against them.
    """

    records_path: Path | str
    tree_path: Path | str | None = None
    levels: Sequence[int] | None = None
    key_column: str = "record_key"
    text_column: str = "text"
    label_column: str = "label"
    target_depth: Sequence[int] | None = None
    embeddings_path: Path | str | None = None
    embedding_column: str | None = None


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


def build_case(case_id: str, source: CaseSource) -> BuiltCase:
    """Check a case's arguments, then read its files and validate the records against the
    tree; version both.

    Parameters
    ----------
    case_id
        The case's name (the documented name pattern).
    source
        Its files, columns, tree levels, target depth and embeddings (:class:`CaseSource`).

    Raises
    ------
    InputError
        Naming the parameter (or the field), the value and the rule, for anything that does
        not validate. A bad argument is refused before any file is read.
    """
    check_case_arguments(case_id, source)
    records = read_table(Path(source.records_path), what="records_path")
    embedded: tuple[list[str], npt.NDArray[np.float32]] | None = None
    if source.embedding_column is not None:
        embedded = embeddings_from_frame(
            records, key_column=source.key_column, embedding_column=source.embedding_column
        )
        records = records.drop(source.embedding_column)
    elif source.embeddings_path is not None:
        embedded = read_embeddings_file(source.embeddings_path)
    tree_frame = (
        read_table(Path(source.tree_path), what="tree_path")
        if source.tree_path is not None
        else None
    )
    normalised = normalise_records(
        records,
        key_column=source.key_column,
        text_column=source.text_column,
        label_column=source.label_column,
    )
    if tree_frame is not None:
        tree = tree_from_parent_links(tree_frame)
        nodes = tree_nodes(
            tree, _column_by_code(tree_frame, "title"), _column_by_code(tree_frame, "kind")
        )
    else:
        assert source.levels is not None  # check_case_arguments: exactly one of the two
        tree = tree_from_prefix_levels(
            normalised.get_column("label").unique(maintain_order=True).to_list(),
            list(source.levels),
        )
        nodes = tree_nodes(tree, {}, {})
    normalised = check_labels_in_tree(normalised, tree)
    depth = parse_target_depth(
        list(source.target_depth) if source.target_depth is not None else [tree.max_depth],
        "target_depth",
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


def check_case_arguments(case_id: str, source: CaseSource) -> None:
    """Every rule about :func:`build_case`'s arguments that needs no file: it reads nothing.

    Raises
    ------
    InputError
        Naming the parameter, the value and the rule.
    """
    validate_case_id(case_id)
    for name, path in (
        ("records_path", source.records_path),
        ("tree_path", source.tree_path),
        ("embeddings_path", source.embeddings_path),
    ):
        if path is not None and (not isinstance(path, str | Path) or not str(path)):
            raise InputError(name, path, "give the path of a file")
    if (source.tree_path is None) == (source.levels is None):
        raise InputError(
            "tree_path",
            source.tree_path,
            "give exactly one of `tree_path` or `levels`",
        )
    if source.levels is not None:
        check_prefix_lengths(source.levels)
    if source.embeddings_path is not None and source.embedding_column is not None:
        raise InputError(
            "embeddings_path",
            str(source.embeddings_path),
            "give at most one of `embeddings_path` or `embedding_column`",
        )
    columns = {
        "key_column": source.key_column,
        "text_column": source.text_column,
        "label_column": source.label_column,
    }
    if source.embedding_column is not None:
        columns["embedding_column"] = source.embedding_column
    seen: dict[str, str] = {}
    for name, column in columns.items():
        if not isinstance(column, str) or not column:
            raise InputError(name, column, "give the name of a column of the records file")
        if column in seen:
            # Name the one the caller changed: a role left at its default is not the mistake.
            first = seen[column]
            blamed, other = (first, name) if column == _DEFAULT_COLUMNS.get(name) else (name, first)
            raise InputError(
                blamed, column, f"names the same column as `{other}`; each role needs its own"
            )
        seen[column] = name
    if source.target_depth is not None:
        items = list(source.target_depth) if isinstance(source.target_depth, list | tuple) else None
        if not items or any(
            isinstance(item, bool) or not isinstance(item, int) or item < 1 for item in items
        ):
            raise InputError(
                "target_depth",
                source.target_depth,
                "give one or more source.levels, each an integer >= 1",
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
