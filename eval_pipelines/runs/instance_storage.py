"""The Dagster instance's PostgreSQL storage, checked before the instance is opened.

A ``dagster.yaml`` whose storage is PostgreSQL (dagster-postgres) is checked first: every
``{env: VAR}`` it names is set, no password is written in the file, the server answers, the
database exists, the role logs in and has the rights Dagster's storage needs (``CREATE`` on the
schema its tables go in, or, when they are all there already, reading and writing them). A
failure is one :class:`InputError` naming the setting of ``dagster.yaml`` and the rule, raised
before Dagster connects: Dagster itself would retry for seconds, then fail half-way with a
traceback, or create some of its tables. The checks only read; nothing is written. An
instance on the local default storage (SQLite) has nothing to check.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import yaml

from eval_pipelines.core.errors import InputError
from eval_pipelines.defs.dagster_private import instance_storage_tables
from eval_pipelines.storage.postgres_failures import PostgresFailure, postgres_failure

# Where dagster-postgres reads its connection: the storage of everything, or one per storage.
STORAGE_SECTIONS = (
    ("storage", "postgres"),
    ("run_storage", "config"),
    ("event_log_storage", "config"),
    ("schedule_storage", "config"),
)
CONNECT_TIMEOUT_SECONDS = 10
DEFAULT_PORT = 5432
# Dagster records its schema revision beside its own tables.
MIGRATION_TABLE = "alembic_version"
TABLE_PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE")
PRIVILEGES_RULE = (
    "the role needs USAGE and CREATE on the schema Dagster's tables go in (the first start "
    "creates them): make it the database's owner, or GRANT USAGE, CREATE ON SCHEMA {schema} "
    "TO {user} with that schema first on its search_path"
)


@dataclass(frozen=True)
class PostgresStorage:
    """One PostgreSQL connection a ``dagster.yaml`` configures, resolved from the environment.

    ``setting`` is where it is configured (``storage.postgres.postgres_db``); ``password_source``
    says where the password comes from (``env DAGSTER_PG_PASSWORD``), never the password."""

    setting: str
    connect: Mapping[str, Any] = field(hash=False)
    address: str
    password_source: str
    key: tuple[tuple[str, str], ...]


def check_instance_storage(home: Path) -> list[PostgresStorage]:
    """Refuse an instance whose PostgreSQL storage cannot work; returns what was checked.

    Raises
    ------
    InputError
        Named after the ``dagster.yaml`` setting: a variable missing from the environment, a
        password written in the file, a server that does not answer, an unknown database, a
        refused login or a role without the rights Dagster's storage needs.
    """
    storages = postgres_storages(home)
    for storage in storages:
        with _connected(storage) as connection:
            _check_rights(storage, connection)
    return storages


# The storages this process has checked, by folder and resolved settings.
_checked: set[tuple[object, ...]] = set()


def shared_storage_key(home: Path) -> tuple[object, ...] | None:
    """The folder and resolved settings of ``home``'s PostgreSQL storage; None for the local
    default."""
    storages = postgres_storages(home)
    if not storages:
        return None
    return (str(home), *(storage.key for storage in storages))


def check_shared_storage(home: Path) -> None:
    """:func:`check_instance_storage` once per process and settings (the environment is read
    each time: changed settings are checked again)."""
    key = shared_storage_key(home)
    if key is None or key in _checked:
        return
    check_instance_storage(home)
    _checked.add(key)


def postgres_storages(home: Path) -> list[PostgresStorage]:
    """The PostgreSQL connections ``home/dagster.yaml`` configures (none: the local default),
    each once."""
    path = home / "dagster.yaml"
    if not path.is_file():
        return []
    config = yaml.safe_load(path.read_text()) or {}
    found: dict[tuple[tuple[str, str], ...], PostgresStorage] = {}
    for section, key in STORAGE_SECTIONS:
        body = config.get(section)
        settings = body.get(key) if isinstance(body, dict) else None
        if not isinstance(settings, dict):
            continue
        for storage in _resolved(path, f"{section}.{key}", settings):
            found.setdefault(storage.key, storage)
    return list(found.values())


def _resolved(path: Path, prefix: str, settings: dict[str, Any]) -> Iterator[PostgresStorage]:
    if "postgres_url" in settings:
        setting = f"{path}: {prefix}.postgres_url"
        url = _value(setting, settings["postgres_url"])
        url = re.sub(r"^postgres(ql)?\+\w+://", "postgresql://", url)
        parsed = psycopg2.extensions.parse_dsn(url)
        if "password" in parsed and not _from_env(settings["postgres_url"]):
            raise InputError(
                setting,
                "a URL with a password",
                "a password must come from the environment, never from the file: "
                "postgres_url: {env: VAR}, or a URL without its password and PGPASSWORD",
            )
        source = "env " + str(settings["postgres_url"]["env"]) if "password" in parsed else ""
        yield _storage(setting, dict(parsed), source or "PGPASSWORD")
    db = settings.get("postgres_db")
    if isinstance(db, dict):
        setting = f"{path}: {prefix}.postgres_db"
        password = db.get("password")
        if password is not None and not _from_env(password) and password != "":
            raise InputError(
                f"{setting}.password",
                "written in the file",
                "a password must come from the environment, never from the file: "
                "password: {env: DAGSTER_PG_PASSWORD}",
            )
        connect = {
            "host": _value(f"{setting}.hostname", db.get("hostname", "")),
            "port": _port(f"{setting}.port", db.get("port", DEFAULT_PORT)),
            "user": _value(f"{setting}.username", db.get("username", "")),
            "dbname": _value(f"{setting}.db_name", db.get("db_name", "")),
            **{str(k): str(v) for k, v in (db.get("params") or {}).items()},
        }
        source = "PGPASSWORD"
        if password is not None and password != "":
            connect["password"] = _value(f"{setting}.password", password)
            source = f"env {password['env']}"
        yield _storage(setting, connect, source)


def _storage(setting: str, connect: dict[str, Any], password_source: str) -> PostgresStorage:
    address = (
        f"{connect.get('user', '')}@{connect.get('host', '')}:"
        f"{connect.get('port', DEFAULT_PORT)}/{connect.get('dbname', '')}"
    )
    key = tuple(sorted((name, str(value)) for name, value in connect.items()))
    return PostgresStorage(setting, connect, address, password_source, key)


def _from_env(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"env"}


def _value(setting: str, value: Any) -> str:
    """A setting's value, ``{env: VAR}`` read from the environment (a secret's value is never
    put in a message)."""
    if not _from_env(value):
        return str(value)
    variable = str(value["env"])
    resolved = os.environ.get(variable)
    if not resolved:
        raise InputError(
            setting,
            f"env {variable}",
            f"the environment variable {variable} is not set (or empty): export it "
            "before starting (deploy/team/team.env.example lists every variable)",
        )
    return resolved


def _port(setting: str, value: Any) -> int:
    text = _value(setting, value)
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise InputError(setting, text, "a TCP port is a whole number from 1 to 65535")
    return int(text)


@contextmanager
def _connected(storage: PostgresStorage) -> Iterator[Any]:
    try:
        connection = psycopg2.connect(connect_timeout=CONNECT_TIMEOUT_SECONDS, **storage.connect)
    except psycopg2.OperationalError as error:
        raise connection_refusal(storage, error) from None
    try:
        yield connection
    finally:
        connection.close()


def connection_refusal(storage: PostgresStorage, error: psycopg2.Error) -> InputError:
    """The refused connection as one line naming the setting at fault."""
    reason = " ".join(str(error).replace("FATAL:", "").split())
    connect = storage.connect
    failure = postgres_failure(error)
    if failure is PostgresFailure.LOGIN_REFUSED:
        return InputError(
            f"{storage.setting}.password",
            storage.password_source,
            f"PostgreSQL refused the login of {connect.get('user')!r} ({reason})",
        )
    if failure is PostgresFailure.NO_DATABASE:
        return InputError(
            f"{storage.setting}.db_name",
            connect.get("dbname"),
            f"no such database on {connect.get('host')}:{connect.get('port')} ({reason})",
        )
    if failure in (PostgresFailure.NO_ROLE, PostgresFailure.PERMISSION_DENIED):
        return InputError(f"{storage.setting}.username", connect.get("user"), reason)
    return InputError(
        f"{storage.setting}.hostname/port",
        f"{connect.get('host')}:{connect.get('port', DEFAULT_PORT)}",
        f"no PostgreSQL server answers there ({reason})",
    )


def _check_rights(storage: PostgresStorage, connection: Any) -> None:
    """Refuse a role that could neither create Dagster's tables nor write the existing ones."""
    tables = sorted(instance_storage_tables() | {MIGRATION_TABLE})
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, current_schema(), "
            "has_schema_privilege(current_schema(), 'USAGE'), "
            "has_schema_privilege(current_schema(), 'CREATE')"
        )
        user, schema, usage, create = cursor.fetchone()
        if schema is None:
            raise InputError(
                f"{storage.setting}.username",
                user,
                "the role's search_path names no existing schema; "
                + PRIVILEGES_RULE.format(schema="SCHEMA", user=user),
            )
        if usage and create:
            return
        where = PRIVILEGES_RULE.format(schema=schema, user=user)
        if not usage:
            raise InputError(f"{storage.setting}.username", user, where)
        cursor.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s)",
            [schema, tables],
        )
        present = {row[0] for row in cursor.fetchall()}
        if present != set(tables):
            raise InputError(f"{storage.setting}.username", user, where)
        missing = _missing_privileges(cursor, schema, tables)
        if missing:
            raise InputError(
                f"{storage.setting}.username",
                user,
                f"without CREATE on schema {schema}, the role must read and write every "
                f"Dagster table there; it lacks {len(missing)} privileges, first "
                f"{', '.join(missing[:3])}",
            )


def _missing_privileges(cursor: Any, schema: str, tables: list[str]) -> list[str]:
    """The table privileges and table sequences' USAGE the role lacks, as ``PRIV ON name``."""
    missing = []
    for table in tables:
        qualified = f'"{schema}"."{table}"'
        for privilege in TABLE_PRIVILEGES:
            cursor.execute("SELECT has_table_privilege(%s, %s)", [qualified, privilege])
            if not cursor.fetchone()[0]:
                missing.append(f"{privilege} ON {schema}.{table}")
    cursor.execute(
        "SELECT s.relname, has_sequence_privilege(s.oid, 'USAGE') FROM pg_class s "
        "JOIN pg_depend d ON d.objid = s.oid AND d.deptype IN ('a', 'i') "
        "JOIN pg_class t ON t.oid = d.refobjid "
        "JOIN pg_namespace n ON n.oid = t.relnamespace "
        "WHERE s.relkind = 'S' AND n.nspname = %s AND t.relname = ANY(%s)",
        [schema, tables],
    )
    missing += [f"USAGE ON SEQUENCE {schema}.{name}" for name, ok in cursor.fetchall() if not ok]
    return missing
