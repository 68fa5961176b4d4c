"""``python -m eval_pipelines.postgres_local``, as the reference deployment's docs run it: a
cluster initialised, started on a port, a database owned by its own role, stopped; passwords
from the environment only, a refused request in one line with exit code 2."""

from __future__ import annotations

from pathlib import Path

import psycopg2
import pytest

from eval_pipelines.core.ports import free_port
from eval_pipelines.postgres_local.__main__ import SUPERUSER_PASSWORD_ENV, main


def test_the_reference_commands_give_a_database_its_role_reaches_over_tcp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = tmp_path / "pg"
    port = free_port()
    monkeypatch.setenv(SUPERUSER_PASSWORD_ENV, "super-secret-1")
    monkeypatch.setenv("EVALS_PASSWORD", "evals-secret-2")
    assert main(["init", "--data-dir", str(data_dir)]) == 0
    assert main(["start", "--data-dir", str(data_dir), "--port", str(port)]) == 0
    try:
        command = ["create-database", "evals", "--port", str(port), "--password-env"]
        assert main([*command, "EVALS_PASSWORD"]) == 0
        out = capsys.readouterr().out
        assert f"postgresql://evals@127.0.0.1:{port}/evals" in out
        assert "secret" not in out
        conn = psycopg2.connect(
            host="127.0.0.1", port=port, user="evals", password="evals-secret-2", dbname="evals"
        )
        conn.close()
        assert main([*command, "EVALS_PASSWORD"]) == 2  # the role exists already
        assert "already exists" in capsys.readouterr().err
        assert main(["create-database", "Bad-Name", "--port", str(port), *command[-1:], "X"]) == 2
        assert "lower-case letters" in capsys.readouterr().err
        monkeypatch.delenv("EVALS_PASSWORD")
        assert main([*command, "EVALS_PASSWORD"]) == 2
        assert capsys.readouterr().err.strip() == (
            "error: $EVALS_PASSWORD is not set: the password is read from the environment only"
        )
    finally:
        assert main(["stop", "--data-dir", str(data_dir)]) == 0
    with pytest.raises(psycopg2.OperationalError):
        psycopg2.connect(host="127.0.0.1", port=port, user="evals", password="x", dbname="evals")


def test_init_without_the_superuser_password_is_refused_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(SUPERUSER_PASSWORD_ENV, raising=False)
    assert main(["init", "--data-dir", str(tmp_path / "pg")]) == 2
    assert SUPERUSER_PASSWORD_ENV in capsys.readouterr().err
    assert not (tmp_path / "pg").exists()
