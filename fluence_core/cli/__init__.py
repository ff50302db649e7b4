"""The ``fluence`` command line.

Every command, built-in or third-party, is registered one way: a plugin of the
``fluence`` entry-point group implements ``fluence_cli(app)`` and adds its
commands to :data:`app`. The built-in commands live one per module in this
package (``fluence_core.cli.<command>``), each its own entry point
``command-<name>``, so any of them can be disabled alone with
``FLUENCE_DISABLE_PLUGINS``. Errors take the one path in :mod:`.base`.
"""

from __future__ import annotations

from fluence_core.cli.base import EXIT_ERROR, FluenceTyper, error
from fluence_core.cli.loading import load_plugin_commands
from fluence_core.errors import FluenceError

app = FluenceTyper(
    help="Fluence: graph scheduling for HPC and hybrid quantum-classical work on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
"""The ``fluence`` app; plugins add their commands to it through ``fluence_cli``."""


def main() -> None:
    """The console script: load every plugin's commands, then run the one asked for."""
    try:
        load_plugin_commands(app)
    except FluenceError as failure:  # e.g. a plugin implements a hook that does not exist
        error(failure)
        raise SystemExit(EXIT_ERROR) from None
    app()


__all__ = ["app", "load_plugin_commands", "main"]
