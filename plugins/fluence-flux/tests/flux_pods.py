"""Stand-ins for a Flux Job's pods on one machine: one set of Linux namespaces per rank.

A pod of the Job gets from Kubernetes what the generated scripts rely on, and
each rank here gets the same from the kernel:

* its own network (a network namespace whose ``eth0`` is one port of a bridge
  in a "switch" namespace of its own, so every broker binds ``eth0:8050``);
* its hostname, ``<job>-<index>`` (a UTS namespace);
* the headless Service's DNS, ``<host>.<subdomain>`` for every rank (an
  ``/etc/hosts`` bind-mounted in a mount namespace);
* its own emptyDir (``FLUENCE_FLUX_ROOT``) and ``JOB_COMPLETION_INDEX``;
* the ConfigMap and Secret mounted read-only at ``FLUENCE_FLUX_SCRIPTS``.

The addresses (198.18.0.0/24, the range set aside for network tests) exist only
inside these namespaces; no packet reaches the host's own network. Needs root,
``ip`` and ``unshare``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SUBNET = "198.18.0"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# In the rank's fresh UTS and mount namespaces: take the pod's hostname and DNS, then the command.
_ENTER = 'hostname "$1" && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"'


def unavailable() -> str | None:
    """Why ranks cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network and UTS namespaces for the ranks need root"
    for tool in ("ip", "unshare", "hostname", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"fxprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


@dataclass
class Exit:
    """How one rank's entrypoint ended."""

    rank: int
    status: int | None
    """None: still running when the run gave up on it (then it was killed)."""
    stdout: str
    stderr: str
    seconds: float


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


class Pods:
    """``len(hosts)`` ranks, each with its namespaces, emptyDir and hosts file."""

    def __init__(self, work: Path, hosts: list[str], subdomain: str, scripts: Path) -> None:
        self.work = work
        self.hosts = hosts
        self.scripts = scripts
        tag = f"fx{os.getpid()}"
        self.switch = f"{tag}-sw"
        self.netns = [f"{tag}-r{rank}" for rank in range(len(hosts))]
        self.hosts_file = work / "hosts"
        lines = ["127.0.0.1 localhost"]
        lines += [f"{SUBNET}.{rank + 1} {host}.{subdomain} {host}"
                  for rank, host in enumerate(hosts)]
        self.hosts_file.write_text("\n".join(lines) + "\n")

    def root(self, rank: int) -> Path:
        return self.work / f"pod-{rank}" / "mnt-flux"

    def __enter__(self) -> Pods:
        _ip("netns", "add", self.switch)
        try:
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for rank, netns in enumerate(self.netns):
                _ip("netns", "add", netns)
                port = f"r{rank}"
                _ip("-n", self.switch, "link", "add", port, "type", "veth",
                    "peer", "name", "eth0", "netns", netns)
                _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
                _ip("-n", netns, "addr", "add", f"{SUBNET}.{rank + 1}/24", "dev", "eth0")
                _ip("-n", netns, "link", "set", "eth0", "up")
                _ip("-n", netns, "link", "set", "lo", "up")
                self.root(rank).parent.mkdir(parents=True, exist_ok=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for netns in [*self.netns, self.switch]:
            pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
            for pid in pids.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)

    def _env(self, rank: int) -> dict[str, str]:
        pod = self.root(rank).parent
        (pod / "tmp").mkdir(exist_ok=True)
        return {"PATH": SYSTEM_PATH, "HOME": str(pod), "TMPDIR": str(pod / "tmp"),
                "FLUENCE_FLUX_ROOT": str(self.root(rank)),
                "FLUENCE_FLUX_SCRIPTS": str(self.scripts),
                "JOB_COMPLETION_INDEX": str(rank), "LANG": "C.UTF-8"}

    def _command(self, rank: int, script: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns[rank],
                "unshare", "--uts", "--mount", "--propagation", "private", "--",
                "/bin/sh", "-c", _ENTER, "enter", self.hosts[rank], str(self.hosts_file),
                "/bin/bash", str(self.scripts / script), *argv]

    def init(self, rank: int) -> subprocess.CompletedProcess[str]:
        """The init container: ``init.sh`` in the rank's namespaces."""
        return subprocess.run(self._command(rank, "init.sh", []), env=self._env(rank),
                              capture_output=True, text=True, timeout=600)

    def run(self, argv: list[str], ranks: list[int] | None = None, *,
            timeout: float = 300, grace: float = 60) -> dict[int, Exit]:
        """Every rank's ``entrypoint.sh <argv>`` at once (or only ``ranks``).

        Waits at most ``timeout`` seconds for rank 0, then ``grace`` more for
        the others; a rank still running then is killed and has status None.
        """
        ranks = list(range(len(self.hosts))) if ranks is None else ranks
        workdir = self.work / "workdir"
        workdir.mkdir(exist_ok=True)
        started = time.monotonic()
        procs = {rank: subprocess.Popen(self._command(rank, "entrypoint.sh", argv),
                                        env=self._env(rank), cwd=workdir, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)
                 for rank in ranks}
        exits: dict[int, Exit] = {}
        order = sorted(procs)  # rank 0 first: its end ends the instance
        for rank in order:
            limit = timeout if rank == order[0] else grace
            proc = procs[rank]
            try:
                out, err = proc.communicate(timeout=limit)
                status: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                status = None
            exits[rank] = Exit(rank, status, out, err, time.monotonic() - started)
        return exits
