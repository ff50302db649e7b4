"""What every ``fluence`` command shares: the app type with the one error path, output.

A command raises :class:`~fluence_core.errors.FluenceError` (or meets an
:class:`OSError`) and :class:`FluenceTyper` turns it into one ``error:`` line on
stderr and exit status 2. Before the command body runs, the settings are read,
so a bad ``FLUENCE_*`` variable is named by whichever command the user ran.
Plugins get this for free: their commands are added to the same app.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from fluence_core import log
from fluence_core.errors import FluenceError
from fluence_core.settings import Settings, load_settings

console = Console()
"""Tables and results (stdout)."""

_Command = TypeVar("_Command", bound=Callable[..., Any])

EXIT_ERROR = 2
"""Exit status of a command that failed on bad input, a bad setting or a broken install."""


def error(message: object) -> None:
    """Write one ``error:`` line on stderr."""
    sys.stderr.write(f"error: {message}\n")


def warn(message: object) -> None:
    """Write one ``warning:`` line on stderr."""
    sys.stderr.write(f"warning: {message}\n")


def settings() -> Settings:
    """The settings, read from the environment (a bad variable raises :class:`SettingsError`)."""
    return load_settings()


def _reporting(command: _Command) -> _Command:
    """Wrap a command so settings are checked first and every expected failure exits 2."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            log.configure(settings().log_level)
            return command(*args, **kwargs)
        except (FluenceError, OSError) as failure:
            error(failure)
            raise typer.Exit(code=EXIT_ERROR) from None

    return run  # type: ignore[return-value]


class FluenceTyper(typer.Typer):
    """A :class:`typer.Typer` whose every command reports errors the same way."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[_Command], _Command]:
        register = super().command(*args, **kwargs)

        def decorator(function: _Command) -> _Command:
            register(_reporting(function))
            return function

        return decorator
