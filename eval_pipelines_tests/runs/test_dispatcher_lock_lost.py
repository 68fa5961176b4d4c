"""The deployment's one dispatcher across a PostgreSQL restart: the restart ends the session
holding the shared advisory lock, so another machine's dispatcher may take it; the first one
notices at its next tick, says so in one line and exits, leaving one dispatcher that dequeues."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipelines.postgres_local.server import LocalPostgres, start, stop
from eval_pipelines.runs.dispatcher import LOCK_LOST
from eval_pipelines.runs.shared_locks import DISPATCHER_LOCK_KEY
from eval_pipelines_tests.helpers.machines import Machine, team_deployment
from eval_pipelines_tests.helpers.postgres import superuser

pytestmark = pytest.mark.slow

DISPATCHER = (sys.executable, "-m", "eval_pipelines.runs.dispatcher")
WAIT_SECONDS = 120.0


def _lock_holders(server: LocalPostgres) -> int:
    """Sessions holding the deployment's dispatcher lock (a 64-bit key: high half in classid,
    low half in objid)."""
    with superuser(server) as conn, conn.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND objsubid = 1 AND (classid::bigint << 32 | objid::bigint) = %s",
            [DISPATCHER_LOCK_KEY],
        )
        row = cursor.fetchone()
        assert row is not None
        return int(row[0])


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _dispatcher(machine: Machine) -> subprocess.Popen[str]:
    return machine.start(*DISPATCHER)


def _holding_the_lock(machine: Machine, server: LocalPostgres) -> subprocess.Popen[str]:
    """``machine``'s dispatcher, once it holds the deployment's lock."""
    dispatcher = _dispatcher(machine)
    _until(lambda: _lock_holders(server) == 1, f"{machine.name}'s dispatcher took no lock")
    return dispatcher


def test_a_dispatcher_whose_lock_session_ended_stops_so_one_dispatcher_dequeues(
    tmp_path: Path, own_server: LocalPostgres
) -> None:
    with team_deployment(tmp_path, own_server, with_unseen_case=False) as team:
        first, second = team.machines
        before_restart = _holding_the_lock(first, own_server)
        stop(own_server.data_dir, mode="immediate")
        start(own_server.data_dir, port=own_server.port)
        after_restart = _holding_the_lock(second, own_server)

        # Well before its idle exit: only the lost lock makes machine A's dispatcher leave.
        _, log = before_restart.communicate(timeout=WAIT_SECONDS / 4)
        assert before_restart.returncode == 0, log
        assert [line for line in log.splitlines() if LOCK_LOST in line], log
        assert after_restart.poll() is None, "machine B's dispatcher left too"
        assert _lock_holders(own_server) == 1


def test_a_dispatcher_keeps_its_lock_while_the_server_runs(
    tmp_path: Path, own_server: LocalPostgres
) -> None:
    with team_deployment(tmp_path, own_server, with_unseen_case=False) as team:
        first, second = team.machines
        holder = _holding_the_lock(first, own_server)
        refused = second.run(*DISPATCHER, timeout=WAIT_SECONDS)
        assert refused.returncode == 0 and LOCK_LOST not in refused.stderr, refused.stderr
        time.sleep(3)  # a few of machine A's ticks
        assert holder.poll() is None, holder.communicate()[1]
        assert _lock_holders(own_server) == 1
