import polars as pl
import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.tree import tree_from_parent_links, tree_from_prefix_levels


def _tree_rows():
    return pl.DataFrame(
        {
            "code": ["1", "A00-A09", "A00", "A00.0", "A01", "A01.0", "A01.00"],
            "parent": [None, "1", "A00-A09", "A00", "A00-A09", "A01", "A01.0"],
            "kind": ["chapter", "block", "category", "sub", "category", "sub", "sub"],
        }
    )


def _tree():
    return tree_from_parent_links(_tree_rows())


def test_levels_come_from_parent_links_not_prefixes():
    tree = _tree()
    assert tree.max_depth == 5
    assert tree.path("A01.00") == ("1", "A00-A09", "A01", "A01.0", "A01.00")
    assert tree.ancestor_at("A00.0", 2) == "A00-A09"
    assert tree.ancestor_at("A00.0", 5) is None
    assert [level.name for level in tree.levels] == [
        "chapter",
        "block",
        "category",
        "sub L4",
        "sub L5",  # repeated kinds carry their depth
    ]


def test_prefix_levels_ignore_separators():
    tree = tree_from_prefix_levels(["0101.21.00", "0101.29", "02.01"], [2, 4, 6, 8])
    assert tree.path("01012100") == ("01", "0101", "010121", "01012100")
    assert tree.node_of("0101.21.00") == "01012100"
    assert tree.ancestor_at(tree.node_of("0101.29"), 3) == "010129"
    assert tree.node_of("0201") == "0201"


@pytest.mark.parametrize("order", [[6, 5, 4, 3, 2, 1, 0], [3, 6, 0, 5, 1, 4, 2]])
def test_row_order_does_not_change_the_tree(order):
    # Children before their parents take the walk up the links; parents first, one lookup.
    rows = _tree_rows()[order]
    tree = tree_from_parent_links(rows)
    assert tree.paths == _tree().paths
    assert tree.levels == _tree().levels


@pytest.mark.parametrize(
    ("codes", "parents", "field"),
    [
        (["a", "b"], [None, "zz"], "tree.parent"),
        (["a", "a"], [None, None], "tree.code"),
        (["a", "b"], ["b", "a"], "tree.parent"),
        (["a", "b"], [None, "b"], "tree.parent"),  # its own parent
        (["r", "a", "b", "c"], [None, "c", "a", "b"], "tree.parent"),  # a loop below a root
        (["a", ""], [None, "a"], "tree.code"),
    ],
)
def test_bad_trees_name_the_field(codes, parents, field):
    with pytest.raises(InputError) as error:
        tree_from_parent_links(pl.DataFrame({"code": codes, "parent": parents}))
    assert error.value.field == field


def test_prefix_label_of_unknown_length_is_an_error():
    with pytest.raises(InputError, match="one of those lengths"):
        tree_from_prefix_levels(["0101.2"], [2, 4, 6, 8])


def test_restricted_tree_keeps_ancestors_and_levels():
    tree = _tree().restricted_to({"A01.00", "nope"})
    assert set(tree.paths) == {"1", "A00-A09", "A01", "A01.0", "A01.00"}
    assert tree.path("A01.00") == _tree().path("A01.00")
    assert tree.max_depth == 5


def test_null_or_blank_kinds_do_not_name_a_level():
    """A kind column that is null (how a tree without kinds is stored) or blank names no level:
    such a level reads 'level N', and a kind given for some of its nodes wins."""
    rows = _tree_rows().with_columns(
        pl.Series("kind", [None, "  ", "category", None, None, None, None], dtype=pl.String)
    )
    names = [level.name for level in tree_from_parent_links(rows).levels]
    assert names == ["level 1", "level 2", "category", "level 4", "level 5"]
