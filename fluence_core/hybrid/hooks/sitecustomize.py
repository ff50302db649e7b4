"""Fluence's interpreter-start hook for user containers.

Staged by ``fluence stage DIR`` next to the ``fluence_staged`` package. With
``DIR`` on ``PYTHONPATH`` every ``python app.py`` imports this module at start
(the ``site`` module does), which installs the vendor interceptors so each
quantum task carries the pod's uid. It fails soft: a missing SDK, a missing
package or any error leaves the user's program exactly as it was. A
``sitecustomize`` the image already had is still run after ours.
"""


def _fluence_boot() -> None:
    try:
        import fluence_staged

        fluence_staged.boot()
    except Exception:
        pass


def _chain_next_sitecustomize() -> None:
    """Run the ``sitecustomize`` this file shadows (a distribution's own), if any."""
    try:
        import importlib.machinery
        import importlib.util
        import os
        import sys

        here = os.path.dirname(os.path.abspath(__file__))
        rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        sys.modules["_fluence_chained_sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception:
        pass


_fluence_boot()
_chain_next_sitecustomize()
