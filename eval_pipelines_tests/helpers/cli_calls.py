"""The CLI run in-process as the tests drive it: exit code and output of one command, a
refusal's one line, and what a refusal must leave unwritten in the warehouse."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest


def cli(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr) of this command only."""
    from eval_pipelines.cli.main import main

    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as usage_error:  # argparse's refusal of a flag: the program's exit
        code = usage_error.code if isinstance(usage_error.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def succeeded(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    """Exit 0; returns the command's stdout."""
    code, out, err = cli(capsys, *argv)
    assert code == 0, (argv, code, err)
    return out


def refused(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    """Exit 2, nothing on stdout, one ``error:`` line on stderr; returns that line."""
    code, out, err = cli(capsys, *argv)
    assert code == 2, (argv, code, out, err)
    assert out == "", (argv, out)
    assert err.startswith("error: ") and err.count("\n") == 1, (argv, err)
    return err[len("error: ") : -1]


def stored(warehouse: Path) -> tuple[int, int, int] | None:
    """(data_tables rows, heads, storage tables); None when there is no warehouse file."""
    if not warehouse.exists():
        return None
    conn = duckdb.connect(str(warehouse), read_only=True)
    try:
        counts = []
        for sql in (
            "SELECT count(*) FROM data_tables",
            "SELECT count(*) FROM data_table_heads",
            "SELECT count(*) FROM information_schema.tables WHERE table_name LIKE 'data_rows_%'",
        ):
            row = conn.execute(sql).fetchone()
            assert row is not None
            counts.append(int(row[0]))
        return counts[0], counts[1], counts[2]
    finally:
        conn.close()
