"""``python -m tribunal.envs --port 8105``: the environments over the Open Reward Standard
(:mod:`tribunal.envs.ors`), pointed at the services by ``TRIBUNAL_ENVS_MATH_URL``,
``TRIBUNAL_ENVS_CODE_URL`` and ``TRIBUNAL_ENVS_GATEWAY_URL``."""

from __future__ import annotations

import argparse

import uvicorn

from tribunal.envs.app import create_app


def main() -> None:
    """Serve the ORS app until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m tribunal.envs")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8105)
    args = parser.parse_args()
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
