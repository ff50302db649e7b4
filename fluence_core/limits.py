"""Every bound Fluence puts on what it reads, in one place.

Input comes from people and programs Fluence does not control: pods, nodes,
``resources.yaml``, scenario files, settings. Each bound keeps one bad object
from costing unbounded memory or time, and each is far above what a real
cluster needs. An input past a bound is refused with an error that names it.
"""

from __future__ import annotations

from typing import Final

MAX_NODE_CORES: Final = 65_536
"""Cores one node may advertise (each is a vertex of the resource graph)."""
MAX_NODE_GPUS: Final = 4_096
"""GPUs one node may advertise (each is a vertex of the resource graph)."""
MAX_GROUP_SIZE: Final = 100_000
"""Pods in one gang (``group-size``, a Job's parallelism)."""
MAX_VIRTUAL_COUNT: Final = 10_000
"""``count`` of one ``resources.yaml`` entry."""
MAX_VIRTUAL_VERTICES: Final = 100_000
"""Virtual vertices a whole ``resources.yaml`` may expand to (counts multiply down the tree)."""
MAX_CONFIG_DEPTH: Final = 32
"""Nesting of ``with:`` lists in ``resources.yaml``."""
MAX_YAML_BYTES: Final = 64 * 2**20
"""Size of any YAML file Fluence reads (node dumps of thousands of nodes fit easily)."""
MAX_YAML_DEPTH: Final = 64
"""Nesting of collections in any YAML document."""
MAX_YAML_NODES: Final = 5_000_000
"""Scalars and collections one YAML file may expand to, aliases counted each time used."""
MAX_SIM_NODES: Final = 10_000
"""Nodes one ``fluence sim`` scenario may build."""
MAX_SIM_PODS: Final = 200_000
"""Pods one ``fluence sim`` scenario may create (gang sizes times counts, over every job)."""
MAX_SIM_REPEATS: Final = 1_000
"""``repeats`` of one scenario."""
MAX_NAME_LENGTH: Final = 253
"""A Kubernetes object name (DNS subdomain)."""
