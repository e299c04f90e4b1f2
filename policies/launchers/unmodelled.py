"""Kinds no launcher module models, and where their pod templates are: the security and image rules read those
templates (policies/launchers/podspecs.py), and the engine says once per object of a training kind among them that its
topology was not checked (a MODEL info line). A kind that gets a module of its own leaves this table."""
from __future__ import annotations

from typing import Any, Iterator

from ..command.shell import ShellError
from ..command.torchrun import DISTRIBUTED_CODE, WORLD_ENV, find_invocation, inline_python
from ..kube.values import BUILT_IN_GROUPS, dig, group_of
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


# How far and how much of an object of an unknown kind is searched for pod templates (bounded on any input).
SHAPE_DEPTH, SHAPE_VALUES = 12, 5000


def shaped_pod_specs(m: Manifest) -> list[tuple[str, dict[str, Any]]]:
    """(field path, PodSpec) of every pod spec in an object of a kind that neither a launcher nor the tables above
    know, found by its shape: a mapping whose `containers` is a list of mappings with an `image` (a PodSpec, as
    KServe writes one inline; a PodTemplateSpec's `spec`). Searched at most SHAPE_DEPTH deep and SHAPE_VALUES values
    into `spec`; nothing below a pod spec is searched."""
    found: list[tuple[str, dict[str, Any]]] = []
    budget = SHAPE_VALUES
    stack: list[tuple[Any, str, int]] = [(dig(m.obj, "spec"), "spec", 0)]
    while stack and budget > 0:
        value, path, depth = stack.pop()
        budget -= 1
        if isinstance(value, dict):
            containers = value.get("containers")
            if isinstance(containers, list) and any(isinstance(c, dict) and "image" in c for c in containers):
                found.append((path, value))
                continue
            if depth < SHAPE_DEPTH:
                stack.extend((v, f"{path}.{k}", depth + 1) for k, v in reversed(list(value.items())))
        elif isinstance(value, list) and depth < SHAPE_DEPTH:
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in reversed(list(enumerate(value))))
    return found


def world_starter(spec: dict[str, Any]) -> str | None:
    """What in a PodSpec says that its pods take part in a distributed world, in words: the launcher a container
    runs (torchrun, `python -m torch.distributed.run`, `accelerate launch`, `deepspeed`, the ImageNet example's
    --dist-url), torch.distributed code written in the manifest (`python -c`), or an env variable such a world
    reads (WORLD_SIZE ...); None where nothing in it does."""
    containers = spec.get("containers")
    for c in containers if isinstance(containers, list) else []:
        if not isinstance(c, dict):
            continue
        words = [w for key in ("command", "args") if isinstance(c.get(key), list) for w in c[key]]
        argv = [str(w) for w in words if isinstance(w, (str, int, float))]
        entries = c.get("env")
        env = {str(e["name"]): e.get("value") for e in (entries if isinstance(entries, list) else [])
               if isinstance(e, dict) and isinstance(e.get("name"), str)}
        try:
            inv = find_invocation(argv, [""] * len(argv), env)
        except ShellError:
            inv = None
        if inv is not None:
            return f"{inv.launcher} (container '{c.get('name')}')"
        code = inline_python(argv)
        if code is not None and DISTRIBUTED_CODE.search(code):
            return f"torch.distributed code (container '{c.get('name')}', python -c)"
        names = [name for name in WORLD_ENV if name in env]
        if names:
            return f"a distributed world ({names[0]} in container '{c.get('name')}''s env)"
    return None


def unread_world(m: Manifest) -> tuple[str, str] | None:
    """(field, what the report says) of an object no launcher models where pods of a distributed world may run, or
    None: a Pod or an object of a kind in TEMPLATE_PATHS whose pod spec starts a world (the security and image rules
    read it; the topology rules do not), or an object of a kind nobody knows that holds pod specs (read by nothing but
    its schema, where its CRD is there)."""
    if m.kind == "Pod" or m.kind in TEMPLATE_PATHS:
        sites = [("spec", dig(m.obj, "spec"))] if m.kind == "Pod" else \
            [(f"{field}.spec", dig(template, "spec")) for field, template in pod_templates(m)]
        for field, spec in sites:
            starter = world_starter(spec) if isinstance(spec, dict) else None
            if starter is not None and m.kind == "Pod":
                return field, (f"a bare Pod is not a launcher the model reads: it runs {starter}; its security and "
                               "image checks ran, but the world it takes part in was not checked")
            if starter is not None:
                return field, (f"a {m.kind} is not a launcher the model reads: its pods run {starter}; their security "
                               "and image checks ran, but how many pods take part and the world they form were not "
                               "checked")
        return None
    if m.kind in REPLICA_SPECS or group_of(m.api_version) in BUILT_IN_GROUPS:
        return None  # a built-in kind with pods is a Pod or in TEMPLATE_PATHS
    specs = shaped_pod_specs(m)
    if not specs:
        return None
    starters = [s for _, spec in specs if (s := world_starter(spec)) is not None]
    more = f" (and {len(specs) - 1} more pod specs)" if len(specs) > 1 else ""
    runs = f", whose pods run {starters[0]}" if starters else ""
    return specs[0][0], (f"{m.kind} ({m.api_version}) is not modelled: it holds this pod spec{more}{runs}; no check "
                         f"read {'them' if more else 'it'} (security, images, how many pods start, any torchrun "
                         "world they form)")
