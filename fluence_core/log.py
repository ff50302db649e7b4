"""The one logger Fluence writes through, with records prefixed ``[fluence]``."""

from __future__ import annotations

import logging
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


def configure(level: str | int) -> None:
    """Attach a stderr handler once and set the level: ``Settings.log_level`` (read from
    :data:`fluence_core.names.ENV_LOG_LEVEL` with every other setting), or a level a
    benchmark or test chooses. A name not in :data:`LEVELS` (any case) is refused."""
    chosen = level
    if isinstance(chosen, str):
        chosen = chosen.strip().upper()
        if chosen not in LEVELS:
            raise SettingsError(f"log level {chosen[:40]!r} ({names.ENV_LOG_LEVEL}): expected"
                                f" one of {', '.join(LEVELS)}")
    logger.setLevel(chosen)
    if not any(getattr(h, "_fluence", False) for h in logger.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler._fluence = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False
