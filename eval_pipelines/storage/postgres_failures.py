"""Why PostgreSQL refused a connection or a statement, read from libpq's or the server's message
(through psycopg2 or DuckDB's ``postgres`` extension, which pass it on).

The warehouse (:mod:`eval_pipelines.storage.postgres_warehouse`) and the Dagster instance's
storage check (:mod:`eval_pipelines.runs.instance_storage`) each turn the kind into one line
naming their own setting; the markers are read here only. A server's message never holds the
password.
"""

from __future__ import annotations

from enum import Enum


class PostgresFailure(Enum):
    LOGIN_REFUSED = "the password was refused or missing"
    NO_DATABASE = "the database does not exist"
    NO_ROLE = "the role does not exist"
    PERMISSION_DENIED = "the role lacks a privilege"
    UNREACHABLE = "no server answers at the address"
    OTHER = "another failure"


UNREACHABLE_MARKERS = (
    "connection refused",
    "could not translate host",
    "timeout",
    "no route",
)


def postgres_failure(error: BaseException) -> PostgresFailure:
    """The kind of ``error``, by the markers of libpq's and PostgreSQL's messages."""
    lowered = str(error).lower()
    if "password" in lowered:
        return PostgresFailure.LOGIN_REFUSED
    if "database" in lowered and "does not exist" in lowered:
        return PostgresFailure.NO_DATABASE
    if "role" in lowered and "does not exist" in lowered:
        return PostgresFailure.NO_ROLE
    if "permission denied" in lowered:
        return PostgresFailure.PERMISSION_DENIED
    if any(marker in lowered for marker in UNREACHABLE_MARKERS):
        return PostgresFailure.UNREACHABLE
    return PostgresFailure.OTHER


def first_line(error: BaseException) -> str:
    """The first non-blank line of ``error``'s message (libpq adds lines of context)."""
    text = str(error)
    return next((line.strip() for line in text.splitlines() if line.strip()), text)
