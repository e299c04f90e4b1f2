"""Kinds no launcher module models, and where their pod templates are: the security and image rules read those
templates (policies/launchers/podspecs.py), and the engine says once per object of a training kind among them that its
topology was not checked (a MODEL info line). A kind that gets a module of its own leaves this table."""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.values import dig
from ..kube.objects import Manifest

# Workload kinds with one pod template -> its path.
TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
# Other Kubeflow training-operator v1 kinds: spec.<x>ReplicaSpecs.<type>.template.
REPLICA_SPECS: dict[str, str] = {"TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
                                 "XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs",
                                 "JAXJob": "jaxReplicaSpecs"}
# Kinds that start distributed training no launcher module models (KubeRay's have a module of their own: kuberay.py).
NOT_MODELLED: tuple[str, ...] = (*REPLICA_SPECS,)
# Where a finished object's TTL is (ARGO002; the modelled kinds say theirs: Launcher.finished_ttl).
TTL_FIELDS: dict[str, tuple[str, ...]] = {"MPIJob": ("spec", "runPolicy", "ttlSecondsAfterFinished")}
# Training kinds whose change means a new run, as a modelled workload's does (Argo CD's replace checks).
RUN_KINDS: tuple[str, ...] = ("MPIJob",)


def pod_templates(m: Manifest) -> Iterator[tuple[str, Any]]:
    """(field path, template as written: perhaps not a mapping) of every pod template of an object of these kinds."""
    kind = m.kind
    if kind in TEMPLATE_PATHS:
        path = TEMPLATE_PATHS[kind]
        yield ".".join(path), dig(m.obj, *path)
    elif kind in REPLICA_SPECS:
        key = REPLICA_SPECS[kind]
        for rtype, rspec in (dig(m.obj, "spec", key) or {}).items():
            yield f"spec.{key}.{rtype}.template", dig(rspec, "template")
