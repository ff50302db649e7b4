"""``kubectl fluence``: the ``kubectl-fluence`` console script kubectl finds on PATH.

kubectl runs ``kubectl-fluence select ...`` for ``kubectl fluence select ...``.
Only the commands a cluster user needs live here (``select``, reading the
figures Fluence keeps in its ConfigMap); anything else is answered with where
to find it instead of a usage dump. Errors take the one path of :mod:`.base`.
"""

from __future__ import annotations

import sys

from fluence_core import names
from fluence_core.cli.base import EXIT_ERROR, FluenceTyper, error
from fluence_core.cli.select import kubectl_select_command

PROG = "kubectl fluence"

kubectl_app = FluenceTyper(
    help="Fluence for cluster users: choose a quantum backend by policy from the figures "
    f"Fluence keeps (ConfigMap {names.FLUENCE_NAMESPACE}/{names.BACKENDS_CONFIGMAP}).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
kubectl_app.command("select")(kubectl_select_command)


@kubectl_app.callback()
def _group() -> None:
    """Keeps ``select`` a subcommand (Typer runs a lone command as the app itself)."""

COMMANDS = ("select",)


def unknown_command(argv: list[str]) -> str | None:
    """The friendly answer for a command this plugin does not have, or None."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or first in COMMANDS:
        return None
    return (f"{PROG} has no command {first!r} (it has: {', '.join(COMMANDS)}); "
            f"Fluence's other commands are `fluence {first} ...` (pip install fluence-core)")


def main(argv: list[str] | None = None) -> None:
    """Dispatch ``select``; say plainly what to run for anything else."""
    args = sys.argv[1:] if argv is None else argv
    problem = unknown_command(args)
    if problem is not None:
        error(problem)
        raise SystemExit(EXIT_ERROR)
    kubectl_app(args=args, prog_name=PROG)
