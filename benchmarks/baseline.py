"""What the benchmarks that compare this tree with a git ref share: the ref checked out
beside this one, and the in-memory cluster of whichever tree a child process runs on."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def baseline_tree(ref: str | None, keep: Path | None = None) -> Iterator[Path | None]:
    """``ref`` as a detached worktree (None when no ref is asked): a temporary one, removed
    after; or, with ``keep``, the worktree in that folder, made on the first call and moved
    to ``ref`` on the next ones (its venv, :func:`baseline_python`, kept with it)."""
    if not ref:
        yield None
        return
    if keep is not None:
        keep = keep.resolve()
        if (keep / ".git").exists():
            subprocess.run(["git", "-C", str(keep), "checkout", "--detach", "--quiet", ref],
                           check=True, capture_output=True)
        else:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(keep),
                            ref], check=True, capture_output=True)
        yield keep
        return
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), ref],
                       check=True, capture_output=True)
        try:
            yield base
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           check=False, capture_output=True)


def baseline_python(tree: Path) -> Path:
    """The interpreter of a venv of ``tree``'s own (``tree/.venv``), with ``tree``'s
    ``requirements-dev.txt`` installed (the core and every plugin, editable, as each
    engineer's venv): a child run by it imports only that tree's modules and plugins, so a
    baseline from before a module moved runs as it was. Made on the first call (a minute
    or two); one installed from the same commit is reused (the installs are editable, but
    the entry points are written at install)."""
    venv = tree / ".venv"
    python = venv / "bin" / "python"
    marker = venv / "fluence-installed-from"
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    if python.exists() and marker.exists() and marker.read_text() == commit:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-r",
                    str(tree / "requirements-dev.txt")], check=True, cwd=tree,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker.write_text(commit)
    return python


def quiet_fake_cluster() -> Any:
    """An empty FakeCluster of the fluence_core first on the path (trees from before the
    ``kube/`` package too), with Fluence's log cut to warnings and stderr dropped, so a
    child's stdout is only its figures."""
    from fluence_core import log
    try:
        from fluence_core.kube.fake import FakeCluster
    except ImportError:  # a tree from before the kube/ package
        from fluence_core.fake_cluster import FakeCluster  # type: ignore[no-redef]

    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the log's handler, kept open
    log.configure("WARNING")
    return FakeCluster()
