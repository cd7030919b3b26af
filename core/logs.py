"""Logging of the long-running roles (`arq worker`, `durable scheduler`): one stderr
handler on the "durable" logger, at DURABLE_LOG_LEVEL (INFO by default)."""

from __future__ import annotations

import logging
import os


def configure_logging() -> None:
    root = logging.getLogger("durable")
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(os.environ.get("DURABLE_LOG_LEVEL", "INFO"))
