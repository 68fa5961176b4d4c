"""Start ``dagster dev`` with default signal handlers, and say where its UI is.

Started from a non-interactive shell, ``dagster dev`` can inherit ignored SIGINT/SIGTERM and
then never stops; restoring the defaults before exec makes Ctrl-C and ``kill`` work.

The address it serves on (``-h``/``-p``, ``make dev PORT=``) is written beside the instance,
with this process's id (``dagster dev`` keeps it: it is exec'd), so the reports the CLI
prints can point at the UI that is running, and at none when it has stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

UI_ADDRESS_FILE = "eval_pipelines_ui.json"
# dagster dev's own defaults for -h and -p.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3000


def _address_file() -> Path:
    from eval_pipelines.runs.instance import dagster_home

    return dagster_home() / UI_ADDRESS_FILE


def record_ui_address(argv: Sequence[str], pid: int) -> str:
    """Write the address ``dagster dev argv`` will serve on, for process ``pid``."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-h", "--host", default=DEFAULT_HOST)
    parser.add_argument("-p", "--port", type=int, default=DEFAULT_PORT)
    known, _ = parser.parse_known_args(list(argv))
    address = f"http://{known.host}:{known.port}"
    path = _address_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": address, "pid": pid}))
    return address


def ui_address() -> str | None:
    """The address of the Dagster UI serving this instance, while its server runs; else None."""
    try:
        recorded = json.loads(_address_file().read_text())
        url, pid = str(recorded["url"]), int(recorded["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    from eval_pipelines.runs.processes import process_alive

    return url if process_alive(pid) else None


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    record_ui_address(sys.argv[1:], os.getpid())
    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    os.execv(dagster, [dagster, "dev", *sys.argv[1:]])


if __name__ == "__main__":
    main()
