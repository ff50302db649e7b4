"""The one logger Fluence writes through, with records prefixed ``[fluence]``."""

from __future__ import annotations

import logging
import os
from typing import Final

from fluence_core import names

logger: Final = logging.getLogger(names.LOGGER_NAME)

_FORMAT: Final = "[fluence] %(asctime)s %(levelname)s %(message)s"


def configure(level: str | int | None = None) -> None:
    """Attach a stderr handler once; the level comes from the argument or ``FLUENCE_LOG_LEVEL``."""
    chosen = level if level is not None else os.environ.get("FLUENCE_LOG_LEVEL", "INFO")
    logger.setLevel(chosen if isinstance(chosen, int) else chosen.upper())
    if not any(getattr(h, "_fluence", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._fluence = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
