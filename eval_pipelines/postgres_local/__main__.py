"""``python -m eval_pipelines.postgres_local``: a PostgreSQL server from the installed wheel for
the reference deployment (docs/operations.md), listening on TCP.

    init --data-dir D              a new cluster; the superuser's password from
                                   $EVAL_PIPELINES_PG_SUPERUSER_PASSWORD
    start --data-dir D [--host H] [--port P]
    stop --data-dir D
    create-database NAME --port P [--host H] --password-env VAR
                                   a database owned by a new login role NAME whose password
                                   is read from $VAR (the superuser's from
                                   $EVAL_PIPELINES_PG_SUPERUSER_PASSWORD)

Passwords are read from the environment only, never from the command line (which other users
of the machine can see). Exit code 2 for a refused request, with one line saying why.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import psycopg2

from eval_pipelines.postgres_local import server

SUPERUSER_PASSWORD_ENV = "EVAL_PIPELINES_PG_SUPERUSER_PASSWORD"
EXIT_REFUSED = 2
NAME_RULE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class Refused(Exception):
    """A request this command will not carry out; the message says why in one line."""


def _password(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        raise Refused(f"${variable} is not set: the password is read from the environment only")
    return value


def _create_database(args: argparse.Namespace) -> str:
    if not NAME_RULE.match(args.name):
        raise Refused(
            f"database name {args.name!r}: lower-case letters, digits and _ only, "
            "not starting with a digit (it also names the role)"
        )
    owner_password = _password(args.password_env)
    try:
        conn = psycopg2.connect(
            host=args.host,
            port=args.port,
            user=server.SUPERUSER,
            password=_password(SUPERUSER_PASSWORD_ENV),
            dbname="postgres",
            connect_timeout=10,
        )
    except psycopg2.OperationalError as error:
        raise Refused(f"cannot reach PostgreSQL at {args.host}:{args.port}: {error}") from None
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            cursor.execute(f'CREATE ROLE "{args.name}" LOGIN PASSWORD %s', [owner_password])
            cursor.execute(f'CREATE DATABASE "{args.name}" OWNER "{args.name}"')
    except psycopg2.Error as error:
        raise Refused(f"{args.name}: {str(error).strip().splitlines()[0]}") from None
    finally:
        conn.close()
    return f"postgresql://{args.name}@{args.host}:{args.port}/{args.name}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval_pipelines.postgres_local")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("init", "start", "stop"):
        command = commands.add_parser(name)
        command.add_argument("--data-dir", type=Path, required=True)
        if name == "start":
            command.add_argument("--host", default="127.0.0.1")
            command.add_argument("--port", type=int, default=5432)
    create = commands.add_parser("create-database")
    create.add_argument("name")
    create.add_argument("--host", default="127.0.0.1")
    create.add_argument("--port", type=int, default=5432)
    create.add_argument("--password-env", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "init":
            server.init(args.data_dir, superuser_password=_password(SUPERUSER_PASSWORD_ENV))
            print(f"initialised PostgreSQL in {args.data_dir.absolute()}")
        elif args.command == "start":
            running = server.start(args.data_dir, host=args.host, port=args.port)
            print(f"PostgreSQL listening on {running.host}:{running.port} (log {running.log_file})")
        elif args.command == "stop":
            server.stop(args.data_dir)
            print(f"PostgreSQL in {args.data_dir.absolute()} stopped")
        else:
            print(_create_database(args))
    except (Refused, server.PostgresServerError) as error:
        print(f"error: {str(error).splitlines()[0]}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
