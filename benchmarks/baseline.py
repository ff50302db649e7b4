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
def baseline_tree(ref: str | None) -> Iterator[Path | None]:
    """``ref`` as a temporary detached worktree (None when no ref is asked), removed after."""
    if not ref:
        yield None
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
