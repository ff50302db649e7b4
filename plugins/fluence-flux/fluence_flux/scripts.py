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


def entrypoint_script(workload: FluxWorkload) -> str:
    return f"""#!/bin/bash
# fluence-flux entrypoint for {workload.label}: a Flux instance of {workload.nodes} pods,
# rank 0 (completion index 0) submits the user's command, given as this script's arguments.
set -uo pipefail
nodes={workload.nodes}
tasks_per_node={workload.tasks_per_node}
flux_root="${{FLUENCE_FLUX_ROOT:-{FLUX_ROOT}}}"
view="$flux_root/view"
config="$flux_root/config/broker.toml"

flux="$view/bin/flux"
if [ ! -x "$flux" ]; then
  flux="$(command -v flux)" || {{ echo "fluence-flux: no flux in $view/bin or on PATH" >&2; exit 127; }}
fi
# The view comes last: the user's own tools keep precedence over the view's (python, ...).
export PATH="$PATH:$view/bin"

if [ "${{1:-}}" = "{SUBMIT_FLAG}" ]; then
  shift
  jobid="$("$flux" submit --quiet -N "$nodes" --tasks-per-node "$tasks_per_node" --cwd "$PWD" "$@")" || exit $?
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
if [ "$rank" -eq 0 ]; then
  "$flux" start --broker-opts=--config-path="$config" /bin/bash "$0" {SUBMIT_FLAG} "$@"
else
  "$flux" start --broker-opts=--config-path="$config"
fi
exit $?
"""
