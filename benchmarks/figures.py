"""What the benchmark scripts share: ``name: value`` lines and timed commands."""

from __future__ import annotations

import subprocess
import time


def line(name: str, value: object) -> None:
    """Print one figure as ``name: value`` (floats to 3 significant digits below 100)."""
    if isinstance(value, float):
        value = f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    print(f"{name}: {value}", flush=True)


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run a command to completion; its wall seconds and stdout. A failure ends the script."""
    started = time.perf_counter()
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{command} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return seconds, out.stdout
