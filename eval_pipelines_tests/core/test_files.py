"""The one bounded reader of JSON/YAML input files: size, depth, expansion and finite numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipelines.core.errors import InputError
from eval_pipelines.core.files import MAX_DEPTH, MAX_DOCUMENT_BYTES, read_json, read_yaml


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.exhaustive
@pytest.mark.parametrize("reader", [read_json, read_yaml])
def test_depth_up_to_the_bound_reads_and_past_it_is_refused(reader, tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text(_nested(MAX_DEPTH))
    reader(path, "--file")
    for depth in (MAX_DEPTH + 1, 5_000, 100_000):  # 5,000 raised RecursionError before
        path.write_text(_nested(depth))
        with pytest.raises(InputError, match=f"nests deeper than {MAX_DEPTH} levels"):
            reader(path, "--file")


@pytest.mark.parametrize("reader", [read_json, read_yaml])
def test_a_file_past_the_size_bound_is_refused(reader, tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('"' + "a" * (MAX_DOCUMENT_BYTES - 2) + '"')
    assert len(reader(path, "--file")) == MAX_DOCUMENT_BYTES - 2
    path.write_text('"' + "a" * (10 << 20) + '"')  # one 10 MB line
    with pytest.raises(InputError, match="is larger than 1 MiB") as error:
        reader(path, "--file")
    assert error.value.field == "--file" and error.value.value == str(path)


def test_yaml_aliases_cannot_expand_past_the_value_bound(tmp_path: Path) -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"{b}: &{b} [{', '.join(['*' + a] * 10)}]"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="holds more than 200,000 values"):
        read_yaml(path, "--file")
    # A few aliases are fine: they are measured once each.
    path.write_text("base: &b {k: 1}\none: *b\ntwo: *b\n")
    assert read_yaml(path, "--file")["two"] == {"k": 1}


def test_a_yaml_document_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("&a [1, *a]\n")
    with pytest.raises(InputError, match="refers to itself"):
        read_yaml(path, "--file")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"then": {"boost": NaN}}', "then.boost"),
        ('[{"config": {"x": [1, Infinity]}}]', "[0].config.x[1]"),
        ('{"t": -Infinity}', "at t:"),
        ('{"t": 1e999}', "holds inf at t"),  # overflows to infinity
    ],
)
def test_json_non_finite_numbers_are_refused_naming_where(
    text: str, where: str, tmp_path: Path
) -> None:
    path = tmp_path / "doc.json"
    path.write_text(text)
    with pytest.raises(InputError, match="numbers must be finite") as error:
        read_json(path, "--file")
    assert where in str(error.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", ".NaN"])
def test_yaml_non_finite_numbers_are_refused(value: str, tmp_path: Path) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text(f"then: {{prefer: [A], boost: {value}}}\n")
    with pytest.raises(InputError, match="at then.boost: numbers must be finite"):
        read_yaml(path, "--file")


def test_table_files_past_the_size_bound_are_refused(tmp_path: Path) -> None:
    # A sparse file: 4 GiB + 1 byte on paper, nothing on disk. Every table reader refuses it
    # before reading (polars would read it whole into memory).
    from eval_pipelines.core.embeddings.vectors import read_embeddings_file
    from eval_pipelines.core.files import MAX_TABLE_BYTES
    from eval_pipelines.core.lift.logs import read_log
    from eval_pipelines.core.queries.table_schema import read_table_file
    from eval_pipelines.core.records import read_table

    path = tmp_path / "huge.parquet"
    with path.open("wb") as handle:
        handle.truncate(MAX_TABLE_BYTES + 1)
    for read in (
        lambda: read_table(path, what="--records"),
        lambda: read_table_file(path),
        lambda: read_log(path),
        lambda: read_embeddings_file(path),
    ):
        with pytest.raises(InputError, match="is larger than 4 GiB"):
            read()
