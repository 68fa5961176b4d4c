"""Code trees: tree levels from parent links or from prefix lengths.

Tree levels are never inferred from string prefixes unless the case says so (``levels``):
ICD-10-CM chapters (``1``) and blocks (``A00-A09``) are not prefixes of their children.
Level 1 is the top of the tree; a code's depth is the level it sits at.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.results import JsonResult

_SEPARATORS = re.compile(r"[^0-9A-Za-z]")


@dataclass(frozen=True)
class Level(JsonResult):
    """One level of a code tree: its depth (1 = top) and a readable name."""

    depth: int
    name: str


@dataclass(frozen=True)
class CodeTree:
    """A code tree in which every code knows its ancestors.

    Attributes
    ----------
    mode
        ``"tree"`` (parent links) or ``"prefix"`` (prefix lengths over the code).
    levels
        The levels, top first.
    paths
        For each known code, its ancestors from level 1 down to the code itself.
    prefix_lengths
        In prefix mode, the prefix length of each level (e.g. ``(2, 4, 6, 8)``).
    """

    mode: str
    levels: tuple[Level, ...]
    paths: dict[str, tuple[str, ...]] = field(repr=False)
    prefix_lengths: tuple[int, ...] = ()

    @property
    def max_depth(self) -> int:
        return len(self.levels)

    def node_of(self, label: str) -> str | None:
        """The tree node a label names (prefix mode strips separators), or None if unknown."""
        node = _SEPARATORS.sub("", label) if self.mode == "prefix" else label
        return node if node in self.paths else None

    def path(self, node: str) -> tuple[str, ...]:
        """Ancestors of a known node from level 1 down to the node itself."""
        return self.paths[node]

    def restricted_to(self, nodes: set[str]) -> CodeTree:
        """The same tree knowing only ``nodes`` and their ancestors (unknown nodes ignored).

        Classify steps receive the tree through Dagster's IO manager; shipping only the part
        the evidence and memo touch keeps those payloads small (ICD-10-CM has 98,505 nodes).
        """
        paths: dict[str, tuple[str, ...]] = {}
        for node in nodes:
            path = self.paths.get(node)
            if path is not None:
                for depth in range(1, len(path) + 1):
                    paths.setdefault(path[depth - 1], path[:depth])
        return CodeTree(self.mode, self.levels, paths, self.prefix_lengths)

    def ancestor_at(self, node: str | None, depth: int) -> str | None:
        """The node's ancestor at ``depth``, or None when the node is shallower (or None)."""
        if node is None:
            return None
        path = self.paths.get(node)
        if path is None or len(path) < depth:
            return None
        return path[depth - 1]


def tree_from_parent_links(nodes: pl.DataFrame) -> CodeTree:
    """Build a tree from a frame with columns ``code``, ``parent`` (null at roots), optional
    ``title`` and ``kind``. A level is named by its most common kind; a level with no kind
    (null or blank, or no ``kind`` column) reads ``level N``.

    Raises
    ------
    InputError
        On a missing column, an empty or duplicate code, a parent that is not a code, or a cycle.
    """
    for column in ("code", "parent"):
        if column not in nodes.columns:
            raise InputError(
                "tree", sorted(nodes.columns), f"the tree file needs a {column!r} column"
            )
    codes = nodes.get_column("code").cast(pl.String).to_list()
    parents = nodes.get_column("parent").cast(pl.String).to_list()
    parent_of: dict[str, str | None] = {}
    for code, parent in zip(codes, parents, strict=True):
        if code is None or code.strip() == "":
            raise InputError("tree.code", code, "every tree row needs a non-empty code")
        if code in parent_of:
            raise InputError("tree.code", code, "codes must be unique in the tree")
        parent_of[code] = parent if parent not in (None, "") else None
    for code, parent in parent_of.items():
        if parent is not None and parent not in parent_of:
            raise InputError("tree.parent", parent, f"parent of {code!r} is not a code in the tree")

    paths: dict[str, tuple[str, ...]] = {}
    for code, parent in parent_of.items():
        # Parents usually come before their children (a stored tree is read in code order):
        # one lookup then; the walk up is for the others.
        above = () if parent is None else paths.get(parent)
        if above is not None:
            paths[code] = (*above, code)
        else:
            _add_path(code, parent_of, paths)

    max_depth = max((len(p) for p in paths.values()), default=0)
    kinds_by_depth: defaultdict[int, Counter[str]] = defaultdict(Counter)
    if "kind" in nodes.columns:
        kinds = nodes.get_column("kind").cast(pl.String).to_list()
        depths = [len(paths[code]) for code in codes]
        for (depth, kind), count in Counter(zip(depths, kinds, strict=True)).items():
            # A null or blank kind names nothing: a tree stored without kinds has null kinds,
            # which would otherwise name every level "None" ("None L1", "None L2", ...).
            if kind is not None and kind.strip():
                kinds_by_depth[depth][kind.strip()] += count
    levels = []
    for depth in range(1, max_depth + 1):
        counts = kinds_by_depth.get(depth)
        name = counts.most_common(1)[0][0] if counts else f"level {depth}"
        levels.append(Level(depth=depth, name=name))
    repeated = {name for name, count in Counter(lv.name for lv in levels).items() if count > 1}
    # Several levels of one kind (ICD-10-CM's 4-, 5- and 6-character subcategories) get their
    # depth in the name, so every level reads differently in reports.
    levels = [
        Level(lv.depth, f"{lv.name} L{lv.depth}") if lv.name in repeated else lv for lv in levels
    ]
    return CodeTree(mode="tree", levels=tuple(levels), paths=paths)


def _add_path(
    code: str, parent_of: dict[str, str | None], paths: dict[str, tuple[str, ...]]
) -> None:
    """Give ``code`` and the ancestors above it that have no path yet their paths, walking up
    the parent links."""
    chain: list[str] = []
    cursor: str | None = code
    seen: set[str] = set()
    while cursor is not None and cursor not in paths:
        if cursor in seen:
            raise InputError("tree.parent", cursor, "parent links must not form a cycle")
        seen.add(cursor)
        chain.append(cursor)
        cursor = parent_of[cursor]
    path = paths[cursor] if cursor is not None else ()
    for node in reversed(chain):
        path = (*path, node)
        paths[node] = path


def check_prefix_lengths(prefix_lengths: Sequence[int]) -> None:
    """Prefix lengths (``levels``): one or more integers, strictly increasing, each >= 1.

    Raises
    ------
    InputError
        On ``levels``, naming the rule.
    """
    lengths = list(prefix_lengths) if isinstance(prefix_lengths, list | tuple) else None
    if not lengths:
        raise InputError("levels", prefix_lengths, "give at least one prefix length")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in lengths) or any(
        b <= a for a, b in zip(lengths, lengths[1:], strict=False)
    ):
        raise InputError("levels", prefix_lengths, "prefix lengths must be increasing and >= 1")


def tree_from_prefix_levels(labels: list[str], prefix_lengths: list[int]) -> CodeTree:
    """Build a tree whose level ``i`` is the first ``prefix_lengths[i]`` characters of the code,
    separators (anything but letters and digits) ignored: ``0101.21.00`` with ``2,4,6,8`` has
    ancestors ``01``, ``0101``, ``010121``, ``01012100``.

    Raises
    ------
    InputError
        If the lengths are not strictly increasing positive integers, or a label's length
        (separators ignored) is not one of them.
    """
    check_prefix_lengths(prefix_lengths)
    paths: dict[str, tuple[str, ...]] = {}
    for label in labels:
        node = _SEPARATORS.sub("", label)
        if node in paths:
            continue
        if len(node) not in prefix_lengths:
            raise InputError(
                "label",
                label,
                f"with `levels` {','.join(map(str, prefix_lengths))} a code must have one of "
                f"those lengths once separators are removed (it has {len(node)})",
            )
        path = tuple(node[:length] for length in prefix_lengths if length <= len(node))
        for depth in range(1, len(path) + 1):
            paths.setdefault(path[depth - 1], path[:depth])
    levels = tuple(
        Level(depth=depth, name=f"{length} characters")
        for depth, length in enumerate(prefix_lengths, start=1)
    )
    return CodeTree(mode="prefix", levels=levels, paths=paths, prefix_lengths=tuple(prefix_lengths))
