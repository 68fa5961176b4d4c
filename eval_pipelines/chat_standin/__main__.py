"""``python -m eval_pipelines.chat_standin [--port 8199] [--latency-ms 0]``: the stand-in on
127.0.0.1 until Ctrl-C."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

from eval_pipelines.chat_standin.server import serve_standin


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval_pipelines.chat_standin",
        description="A local OpenAI-compatible Chat Completions stand-in (deterministic answers).",
    )
    parser.add_argument("--port", type=int, default=8199, help="port on 127.0.0.1 (0: free)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay of every answer")
    args = parser.parse_args(argv)
    with serve_standin(port=args.port, latency_ms=args.latency_ms) as server:
        print(f"chat stand-in at {server.base_url} (latency {args.latency_ms:g} ms)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
