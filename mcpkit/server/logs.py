"""The server's own log: stderr, in one format, in every process (the command line's and each
worker's)."""

from __future__ import annotations

import logging
import sys

#: loggers that speak at INFO whatever the log level when serving HTTP: one line per request
HTTP_REQUEST_LOGGERS = ("mcpkit.http.access", "mcpkit.http.search")


def setup_logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level.upper(), logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def log_http_requests() -> None:
    """Turn on the access log's loggers (the ``access_log`` setting still decides)."""
    for name in HTTP_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
