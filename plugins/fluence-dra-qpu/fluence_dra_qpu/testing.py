"""Test helpers shipped with the driver: its log records, collected."""

from __future__ import annotations

import logging


class Records(logging.Handler):
    """The fluence logger's messages, whatever handlers a previous test configured."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append((record.levelno, record.getMessage()))

    def at(self, level: int) -> list[str]:
        return [message for found, message in self.messages if found == level]
