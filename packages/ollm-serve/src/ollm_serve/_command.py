"""The ``ollm serve`` command: its arguments, the safety checks before it binds, uvicorn."""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping

from ollm.errors import UsageError

__all__ = ["api_keys", "check_bind", "configure", "run"]

KEYS_VARIABLE = "OLLM_SERVE_API_KEYS"


def configure(parser: argparse.ArgumentParser) -> None:
    """``ollm serve``'s arguments."""
    parser.add_argument(
        "-p",
        "--provider",
        dest="providers",
        action="append",
        default=[],
        metavar="NAME",
        help="a provider to serve (repeat for more; the first is the default; a request's "
        "model PROVIDER:MODEL goes to that one; default: $OLLM_PROVIDER or the default "
        "provider)",
    )
    parser.add_argument("-m", "--model", help="the model of a request that names none")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8000, help="the port (default 8000)")
    parser.add_argument(
        "--api-key",
        dest="api_keys",
        action="append",
        default=[],
        metavar="KEY",
        help=f"a key clients must send as 'Authorization: Bearer KEY' (repeat for more; "
        f"also ${KEYS_VARIABLE}=k1,k2); required to bind another address than loopback",
    )
    parser.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let web pages from ORIGIN call the server (repeat for more; off by default)",
    )
    parser.add_argument(
        "--tool-strategy",
        default=None,
        help="how models call tools: auto (default), native, react, or an installed strategy",
    )
    parser.add_argument(
        "--middleware",
        action="append",
        default=[],
        metavar="NAME",
        help="an installed middleware around every request (redact, otel...)",
    )
    parser.add_argument(
        "--log",
        action="store_true",
        help="log every served chat to the conversation log (`ollm logs`; $OLLM_LOGS_PATH); "
        "off by default: a server's clients do not expect their chats kept",
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=64,
        help="requests served at once; more get 429 with Retry-After (default 64)",
    )
    parser.add_argument(
        "--max-body", type=int, default=8 * 1024 * 1024, help="the largest request body in bytes"
    )
    parser.add_argument(
        "--grace",
        type=int,
        default=10,
        help="seconds SIGTERM lets running requests finish before it stops (default 10)",
    )


def api_keys(given: list[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """The keys of ``--api-key`` and ``OLLM_SERVE_API_KEYS``; an empty one is refused."""
    keys = [*given, *environ.get(KEYS_VARIABLE, "").split(",")]
    keys = [k.strip() for k in keys if k.strip()]
    short = [k for k in keys if len(k) < 16]
    if short:
        raise UsageError(
            "An API key of ollm serve must have at least 16 characters, so that it cannot "
            "be guessed: make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe())'`."
        )
    return tuple(keys)


def check_bind(host: str, keys: tuple[str, ...]) -> None:
    """Refuse to bind ``host`` beyond this machine without keys (fails closed: a name
    that is not ``localhost`` counts as beyond)."""
    if keys or _loopback(host):
        return
    raise UsageError(
        f"ollm serve refuses to listen on {host} without an API key: anyone who reaches "
        f"it could use your models. Give --api-key KEY (or {KEYS_VARIABLE}=KEY), or bind "
        "127.0.0.1."
    )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM (which lets requests finish for ``--grace`` s)."""
    import uvicorn

    from ollm_serve import ServeSettings, create_app

    keys = api_keys(args.api_keys, os.environ)
    check_bind(args.host, keys)
    if args.max_concurrent < 1 or args.max_body < 1:
        raise UsageError("--max-concurrent and --max-body must be at least 1.")
    providers = args.providers or [p for p in [os.environ.get("OLLM_PROVIDER", "")] if p]
    app = create_app(
        providers,
        model=args.model or os.environ.get("OLLM_MODEL") or None,
        tool_strategy=args.tool_strategy or os.environ.get("OLLM_TOOL_STRATEGY") or "auto",
        middleware=args.middleware,
        log=args.log,
        settings=ServeSettings(
            api_keys=keys,
            cors=tuple(args.cors),
            max_body=args.max_body,
            max_concurrent=args.max_concurrent,
        ),
    )
    for name in providers:
        # A provider that does not exist stops the command now, not at the first request.
        app.backend.registries.providers.spec(name.split(":", 1)[0])
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        http="httptools",
        loop="asyncio",
        lifespan="on",
        timeout_graceful_shutdown=args.grace,
        log_level="debug" if args.debug else "info",
    )
    uvicorn.Server(config).run()
    return 0
