"""Start ``dagster dev`` with default signal handlers.

Started from a non-interactive shell, ``dagster dev`` can inherit ignored SIGINT/SIGTERM and
then never stops; restoring the defaults before exec makes Ctrl-C and ``kill`` work.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    os.execv(dagster, [dagster, "dev", *sys.argv[1:]])


if __name__ == "__main__":
    main()
