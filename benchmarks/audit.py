"""What each scheduler asked of the API server during a timed run, from its audit log.

``bench_scheduler.py --peer --audit`` starts kube-apiserver with :data:`POLICY`
(every request at ``Metadata`` level, one line when it completes) and, after
each scenario, :func:`summarise` reads the lines of the scenario's namespace
from the moment the scheduler was resumed:

* requests per pod by verb and resource (``create pods/binding``, ``create
  events``, ``patch pods/status``, ...) for each client the scheduler used
  (kube-scheduler posts its events through a client of its own);
* when the bindings reached the server: the first, the 100th, the median and
  the last, in seconds after the resume.

The benchmark's own requests (creating and polling the pods) carry the user
agent :data:`BENCH_AGENT` and are left out. The log costs the API server some
CPU, so the figures of an audited run are for reading the path, not for the
table of ratios.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH_AGENT = "fluence-bench"

POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
"""


def flags(folder: Path) -> list[str]:
    """kube-apiserver flags that write the audit log into ``folder``."""
    policy = folder / "audit-policy.yaml"
    policy.write_text(POLICY)
    return [f"--audit-policy-file={policy}", f"--audit-log-path={folder / 'audit.log'}",
            "--audit-log-format=json", "--audit-log-mode=blocking",
            "--audit-log-maxsize=1000000"]  # MB: 0 means lumberjack's 100 MB, and a rotated
    # log lost a scenario's requests (bench_scale.py at 5,000 nodes read none of them)


@dataclass
class Requests:
    """One scheduler's requests in one scenario's namespace, after its resume."""

    pods: int
    by_kind: Counter[str] = field(default_factory=Counter)
    """``agent: verb resource[/subresource]`` -> requests."""
    binds: list[float] = field(default_factory=list)
    """Seconds after the resume at which each binding reached the server, in order."""
    last_bound: float | None = None
    """Seconds after the resume at which the server answered the last binding."""

    def lines(self) -> list[str]:
        out = [f"    {kind:60} {count / self.pods:6.3f} per pod"
               for kind, count in sorted(self.by_kind.items())]
        if self.binds:
            b = self.binds
            out.append(f"    bindings reached the server at +{b[0]:.3f} s (first), "
                       f"+{b[min(99, len(b) - 1)]:.3f} s (100th), +{b[len(b) // 2]:.3f} s "
                       f"(median), +{b[-1]:.3f} s (last)")
        return out


def summarise(log: Path, namespace: str, resumed: float, pods: int) -> Requests:
    """The requests made in ``namespace`` after ``resumed`` (a ``time.time()``), per pod."""
    result = Requests(pods)
    if not log.exists():
        return result
    with log.open() as lines:
        for line in lines:
            if f'"{namespace}"' not in line:
                continue
            entry: dict[str, Any] = json.loads(line)
            ref = entry.get("objectRef") or {}
            agent = _agent(entry.get("userAgent", ""))
            received = _seconds(entry["requestReceivedTimestamp"])
            if ref.get("namespace") != namespace or agent == BENCH_AGENT or received < resumed:
                continue
            resource = ref.get("resource", "?")
            if ref.get("subresource"):
                resource += "/" + ref["subresource"]
            result.by_kind[f"{agent}: {entry.get('verb')} {resource}"] += 1
            if resource == "pods/binding" and entry.get("verb") == "create":
                result.binds.append(received - resumed)
                answered = _seconds(entry["stageTimestamp"]) - resumed
                result.last_bound = max(result.last_bound or 0.0, answered)
    result.binds.sort()
    return result


_GO_AGENT = re.compile(r"^([^/]+)/\S+ \([^)]*\) kubernetes/[^/]+(?:/(.+))?$")


def _agent(user_agent: str) -> str:
    """A client-go agent without its version, platform and commit: kube-scheduler's event
    client is ``kube-scheduler``, its scheduling client ``kube-scheduler/scheduler``."""
    go = _GO_AGENT.match(user_agent)
    if go is None:
        return user_agent
    return f"{go[1]}/{go[2]}" if go[2] else go[1]


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
