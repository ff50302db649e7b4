"""``python -m fluence_core.cli``: the ``fluence`` console script."""

from fluence_core.cli import main

main()
