"""Dynamic Resource Allocation: devices from ResourceSlices, allocated for pods' claims.

The feature, one folder, each module one job, top to bottom:

* ``writes``: a committed group's claims written before the bind, and taken back;
* ``plan``: a group's claims allocated member by member with the members' nodes;
* ``state``: slices, classes and claims as watched, and which devices are taken;
* ``allocator``: devices for one pod's claims on one node (kube-scheduler's search);
* ``cel``: the selectors, compiled once, evaluated once per device;
* ``claims`` | ``devices``: ResourceClaims, DeviceClasses and a pod's claims; the
  devices of ResourceSlices, by pool and generation.

``docs/dra.md`` says what is supported and the reason a pod gets for what is not.
"""
