"""The two scripts the ConfigMap holds, and the broker configuration init.sh writes.

``init.sh`` runs in the flux-view init container: it copies the Flux install
into the shared emptyDir, installs the CURVE certificate and writes
``broker.toml`` for the job's hosts. ``entrypoint.sh`` replaces the user's
command: every pod starts a broker with that configuration (rank = completion
index = position in the host list); rank 0's initial program ``flux submit``s
the user's command (the script's arguments) across all nodes and exits with
its status, which ends the instance and every pod.

Paths can be moved with ``FLUENCE_FLUX_ROOT`` (the emptyDir), ``FLUENCE_FLUX_SCRIPTS``
(the ConfigMap/Secret mount) and ``FLUENCE_FLUX_VIEW_SOURCE`` (the view in the
init image); the tests run both scripts that way against a stub ``flux``.
"""

from __future__ import annotations

from fluence_flux.workload import FluxWorkload

FLUX_ROOT = "/mnt/flux"
"""The emptyDir holding the view (``view/``), the config (``config/``) and a run dir."""
SCRIPTS_DIR = "/fluence/flux"
"""Where init.sh, entrypoint.sh and curve.cert are mounted (read only)."""
SUBMIT_FLAG = "--fluence-flux-submit"
"""How entrypoint.sh, re-entered as rank 0's initial program, knows it is inside Flux."""


def broker_toml(workload: FluxWorkload, port: int) -> str:
    """The broker configuration (``$flux_root`` is expanded by init.sh)."""
    return f"""[access]
allow-guest-user = true
allow-root-owner = true

[bootstrap]
curve_cert = "$flux_root/run/curve.cert"
default_port = {port}
default_bind = "tcp://{workload.network_device}:%p"
default_connect = "tcp://%h.{workload.subdomain}:%p"
hosts = [
  {{ host = "{workload.hosts}" }},
]

[resource]
noverify = true

[sched-fluxion-qmanager]
queue-policy = "{workload.queue_policy}"
"""


def init_script(workload: FluxWorkload, view_path: str, port: int) -> str:
    return f"""#!/bin/bash
# fluence-flux init for {workload.label}: Flux view, CURVE certificate, broker config.
set -euo pipefail
flux_root="${{FLUENCE_FLUX_ROOT:-{FLUX_ROOT}}}"
scripts="${{FLUENCE_FLUX_SCRIPTS:-{SCRIPTS_DIR}}}"
view_source="${{FLUENCE_FLUX_VIEW_SOURCE:-{view_path}}}"

mkdir -p "$flux_root/view" "$flux_root/config" "$flux_root/run"
cp -a "$view_source/." "$flux_root/view/"
# The app container may run as another user: it copies the certificate to a private file.
chmod 1777 "$flux_root/run"
install -m 0444 "$scripts/curve.cert" "$flux_root/config/curve.cert"
cat > "$flux_root/config/broker.toml" <<EOF
{broker_toml(workload, port)}EOF
echo "fluence-flux: view from $view_source, {workload.nodes} brokers on {workload.hosts}"
"""


START_TIMEOUT_EXIT = 75
"""Rank 0's exit status when not every broker joined in time (EX_TEMPFAIL: try again)."""
SHUTDOWN_GRACE = 30
"""Seconds rank 0's instance may take to shut down after a start timeout before it is killed."""
LATE_MARKER = "late-brokers"
"""File in ``$flux_root/run`` by which rank 0's initial program tells its script of a timeout."""


def entrypoint_script(workload: FluxWorkload, start_timeout: int) -> str:
    """Every pod's command (see the module docstring).

    Rank 0 starts its broker with a quorum of one, so its initial program (this
    script again) runs at once and waits for the other brokers, and for the
    scheduler to know their nodes, itself, at most ``start_timeout`` seconds: the
    broker's own quorum wait has no limit, and a
    pod that never starts would hang the Job. After such a timeout the instance
    may not shut down either (flux-core 0.88's scheduler blocks until every
    node's resources are known), so it gets ``SHUTDOWN_GRACE`` seconds and is
    then killed. A TERM to the script (the pod is deleted) is passed to Flux.
    """
    return f"""#!/bin/bash
# fluence-flux entrypoint for {workload.label}: a Flux instance of {workload.nodes} pods,
# rank 0 (completion index 0) submits the user's command, given as this script's arguments.
set -uo pipefail
nodes={workload.nodes}
tasks_per_node={workload.tasks_per_node}
start_timeout={start_timeout}
flux_root="${{FLUENCE_FLUX_ROOT:-{FLUX_ROOT}}}"
view="$flux_root/view"
config="$flux_root/config/broker.toml"
late="$flux_root/run/{LATE_MARKER}"

flux="$view/bin/flux"
if [ ! -x "$flux" ]; then
  flux="$(command -v flux)" || {{ echo "fluence-flux: no flux in $view/bin or on PATH" >&2; exit 127; }}
fi
# The view comes last: the user's own tools keep precedence over the view's (python, ...).
export PATH="$PATH:$view/bin"

if [ "${{1:-}}" = "{SUBMIT_FLAG}" ]; then
  shift
  deadline=$((SECONDS + start_timeout))
  joined=false
  up=0
  if "$flux" overlay status --wait=full --timeout="${{start_timeout}}s" >/dev/null 2>&1; then
    # The scheduler learns the nodes a moment after their brokers join; Fluxion refuses a job
    # for more nodes than it knows as unsatisfiable, so wait until it knows them all.
    while [ "$SECONDS" -lt "$deadline" ]; do
      up="$("$flux" resource list --states=up --no-header --format="{{nnodes}}" 2>/dev/null)"
      if [ "${{up:-0}}" -ge "$nodes" ] 2>/dev/null; then
        joined=true
        break
      fi
      sleep 1
    done
  fi
  if [ "$joined" != true ]; then
    missing=""
    while read -r _ host state; do
      case "$state" in offline|lost) missing="$missing ${{host%:}}" ;; esac
    done < <("$flux" overlay status --no-pretty 2>/dev/null)
    echo "fluence-flux: not every broker joined rank 0 within ${{start_timeout}}s" \\
         "(FLUENCE_FLUX_START_TIMEOUT); never came up:${{missing:- none, but the scheduler" \
         "knows ${{up:-0}} of $nodes nodes}}" >&2
    touch "$late"
    exit {START_TIMEOUT_EXIT}
  fi
  jobid="$("$flux" submit -N "$nodes" --tasks-per-node "$tasks_per_node" --cwd "$PWD" "$@")" || exit $?
  "$flux" job attach "$jobid"
  exit $?
fi

if [ "$#" -eq 0 ]; then
  echo "fluence-flux: no command to run" >&2
  exit 2
fi
rank="${{JOB_COMPLETION_INDEX:-}}"
if [ -z "$rank" ]; then
  echo "fluence-flux: JOB_COMPLETION_INDEX is not set: not a pod of an Indexed Job" >&2
  exit 2
fi
install -m 0400 "$flux_root/config/curve.cert" "$flux_root/run/curve.cert" || exit $?
if [ "$rank" -ne 0 ]; then
  "$flux" start --broker-opts=--config-path="$config"
  exit $?
fi

rm -f "$late"
set -m  # the instance gets a process group of its own: it can be signalled, or killed, whole
"$flux" start --broker-opts=--config-path="$config" --setattr=broker.quorum=1 \\
  /bin/bash "$0" {SUBMIT_FLAG} "$@" &
instance=$!
trap 'kill -TERM -- "-$instance" 2>/dev/null' TERM INT
waited=0
while kill -0 "$instance" 2>/dev/null; do
  if [ -e "$late" ]; then
    waited=$((waited + 1))
    if [ "$waited" -gt {SHUTDOWN_GRACE} ]; then
      echo "fluence-flux: the instance did not shut down within {SHUTDOWN_GRACE}s: killed" >&2
      kill -KILL -- "-$instance" 2>/dev/null
    fi
  fi
  sleep 1
done
wait "$instance"
status=$?
if [ -e "$late" ]; then
  exit {START_TIMEOUT_EXIT}
fi
exit $status
"""
