"""The boundary between Fluence and Kubernetes, one package.

:mod:`~fluence_core.kube.api` is the protocol every other module is typed
against (with its resource table); :mod:`~fluence_core.kube.client` implements
it over a real API server and :mod:`~fluence_core.kube.fake` in memory, and
both raise :mod:`~fluence_core.kube.errors`. :mod:`~fluence_core.kube.manifests`
reads Kubernetes YAML files; :mod:`~fluence_core.kube.downward` resolves the
environment the kubelet would give a container. Nothing is re-exported here, so
importing the fake never loads the ``kubernetes`` client.
"""
