"""A second "machine" writing the shared warehouse: run as ``python -m
eval_pipelines_tests.helpers.warehouse_writers ACTION ...`` with the warehouse's setting and
password in the environment. It waits for the file ``go`` to appear, so that the processes a
test starts write at the same moment, then prints its result as JSON.

- ``ingest GO FILE...``: ingest each lift log file (``api.lift.ingest``).
- ``register GO CASE N``: register N holdout evaluations of CASE without runs.
- ``migrate GO``: open the warehouse for writing (applies the migrations).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def _wait_for(go: Path) -> None:
    deadline = time.monotonic() + 120
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{go} never appeared")
        time.sleep(0.005)


def main(argv: list[str]) -> None:
    from eval_pipelines import api
    from eval_pipelines.api import lift
    from eval_pipelines.storage.warehouse import connect, schema_version

    action, go, *rest = argv
    done: object
    if action == "migrate":
        from eval_pipelines import settings

        _wait_for(Path(go))
        with connect(settings.warehouse_location(), create=True) as conn:
            done = schema_version(conn)
    elif action == "ingest":
        _wait_for(Path(go))
        done = [lift.ingest(path).stored_rows for path in rest]
    elif action == "register":
        case, count = rest
        _wait_for(Path(go))
        done = [
            api.start_holdout_eval(
                case,
                [{"name": "baseline"}],
                api.HoldoutOptions(sample_size=50, seed=n),
                register_only=True,
            ).eval_id
            for n in range(int(count))
        ]
    else:
        raise SystemExit(f"unknown action {action}")
    print(json.dumps(done))


if __name__ == "__main__":
    main(sys.argv[1:])
