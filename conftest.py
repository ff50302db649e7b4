"""Hypothesis profiles for the whole suite (core, plugins and examples).

The README's test command must give the same answer on every machine and every
run: a property test that fails there has to fail again for whoever reruns it.
So the default profile derandomizes (each test's examples are drawn from a seed
derived from the test itself) and keeps no example database (a fresh clone and a
long-lived checkout run the same examples). Searching for new counterexamples is
a deliberate act: ``pytest --hypothesis-profile=explore`` draws fresh random
examples on every run and remembers failing ones in ``.hypothesis/``.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True, database=None, deadline=None,
                          print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
settings.load_profile("repeatable")
