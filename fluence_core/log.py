"""The one logger Fluence writes through, with records prefixed ``[fluence]``."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, Final

from fluence_core import names
from fluence_core.errors import SettingsError

logger: Final = logging.getLogger(names.LOGGER_NAME)

_FORMAT: Final = "[fluence] %(asctime)s %(levelname)s %(message)s"
LEVELS: Final = names.LOG_LEVELS


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at emit time, not the stream of the first call.

    An in-process caller that swaps stderr (a CLI runner, a test) would otherwise
    leave the handler writing to a closed stream.
    """

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def configure(level: str | int | None = None) -> None:
    """Attach a stderr handler once; the level comes from the argument or the environment
    (:data:`fluence_core.names.ENV_LOG_LEVEL`)."""
    chosen = level if level is not None else os.environ.get(names.ENV_LOG_LEVEL, "INFO")
    if isinstance(chosen, str):
        chosen = chosen.strip().upper()
        if chosen not in LEVELS:
            raise SettingsError(f"{names.ENV_LOG_LEVEL}={chosen[:40]!r}: expected one of"
                                f" {', '.join(LEVELS)}")
    logger.setLevel(chosen)
    if not any(getattr(h, "_fluence", False) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._fluence = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
