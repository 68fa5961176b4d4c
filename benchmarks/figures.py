"""What the benchmark scripts share: ``name: value`` lines, timed commands and the memory
bandwidth probe."""

from __future__ import annotations

import subprocess
import time

# Size of the array the bandwidth probe sums: far beyond any cache.
BANDWIDTH_PROBE_BYTES = 2**30


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


def memory_bandwidth(threads: int, repeat: int) -> float:
    """Bytes per second of a parallel, vectorised float32 sum over 1 GiB (best of ``repeat``):
    what this machine can stream, measured here rather than quoted."""
    import numba
    import numpy as np

    @numba.njit(parallel=True, fastmath=True)
    def total(values: np.ndarray) -> float:
        acc = 0.0
        for i in numba.prange(values.shape[0]):
            acc += values[i]
        return acc

    values = np.ones(BANDWIDTH_PROBE_BYTES // 4, dtype=np.float32)  # pages touched here
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, int(numba.config.NUMBA_NUM_THREADS)))  # type: ignore[attr-defined]
    try:
        total(values[:1024])  # compile outside the timing
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            total(values)
            best = min(best, time.perf_counter() - started)
    finally:
        numba.set_num_threads(previous)
    return BANDWIDTH_PROBE_BYTES / best
