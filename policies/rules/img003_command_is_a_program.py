"""A container's `command` starts a program: its first word is a program name, not a shell line.

`command` is an argv, "not executed within a shell" (kubernetes v1.36.0 staging/src/k8s.io/api/core/v1/types.go,
Container.Command): the container runtime looks up `command[0]` whole, as one file name. `command: ["python
train.py"]` or `["sleep 10; exit 1"]` names a program called `python train.py` that no image has, so the container
fails to start (StartError, "executable file not found"): a pod of the world never runs and the others wait for it
at the rendezvous, or the job fails. Whitespace in `command[0]` is the sign; a `$(VAR)` reference in it is left
alone (the kubelet expands it against the container's env, which only the running pod shows). The image's
entrypoint (no `command`) and `args` are not judged: the entrypoint may be a shell. A container is judged as its
controller builds the pod: KubeRay runs the Ray container of a head or worker group through `/bin/bash -c` with its
command's words in the shell line (ray-project/kuberay v1.7.0 common/pod.go 878-912), unless the object or the group's
template says `ray.io/overwrite-container-cmd: "true"` or the command already contains `ray start`
(`launchers/unmodelled.py`, `as_built_by_kuberay`). In a (Cluster)TrainingRuntime the trainer's `node` container
takes a TrainJob's `spec.trainer.command` in place of its own (kubeflow/trainer v2.3.0 jobset/builder.go 126-135), so
there it is a warning phrased as that condition, and an error on each TrainJob of the manifests that sets no
`spec.trainer.command` and so runs it.

Fails: `command: ["sleep 10; exit 1"]` (the Worker of project-codeflare/appwrapper v1.2.1
samples/wrapped-failing-pytorch-job.yaml, in tests/corpus/); `command: ["python /app/train.py --epochs 1"]`; a Ray
head's `command: ["ray start --head --block"]`; a TrainJob's `spec.trainer.command: ["python train.py"]`.
Passes: `command: [sh, -c, "sleep 10; exit 1"]`; `command: [torchrun, --nproc-per-node=2, train.py]`; a Ray head's
`command: ["echo 123"]` (KubeRay's samples/ray-cluster.head-command.yaml).
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.objects import WARNING, Manifest, Problem
from ..kube.values import dig
from ..launchers.podspecs import ContainerSite
from ..launchers.trainingruntime import template_use
from .kit import RULE_DEFAULT, Context, obj_problem

ID = "IMG003"
NAME = "command-is-a-program"


def check(ctx: Context) -> Iterator[Problem]:
    replaceable: dict[int, list[tuple[ContainerSite, str]]] = {}  # a runtime -> its containers a TrainJob may set
    for cs in ctx.containers:
        use = template_use(cs.manifest, cs.field)
        replaced = use.set_by.get("command") if use else None
        unless = f", in a {use.user} unless its {replaced} replaces it" if use and replaced else ""
        if replaced:
            replaceable.setdefault(id(cs.manifest), []).append((cs, replaced))
        yield from _judged(cs.manifest, f"{cs.field}.command[0]", f"container '{cs.name}' command[0]",
                           cs.container.get("command"), unless)
    for m, launcher in ctx.launched:
        for field, command in launcher.container_settings(m, "command"):
            yield from _judged(m, f"{field}[0]", f"{field}[0]", command, "")
    for w in ctx.workloads:  # a TrainJob that leaves its runtime's command as it is runs it
        runtime = w.runtime
        for cs, setting in replaceable.get(id(runtime), []) if runtime is not None else []:
            if runtime is not None and dig(w.manifest.obj, *setting.split(".")) is None:
                yield from _judged(w.manifest, setting, f"{setting} is not set, so container '{cs.name}' of "
                                   f"{runtime.kind} '{runtime.name}' keeps its command, whose command[0]",
                                   cs.container.get("command"), "")


def _judged(m: Manifest, at: str, what: str, command: Any, unless: str) -> Iterator[Problem]:
    """`command` (a container's, or a setting the controller writes into one; the problem at `at`) as the runtime
    runs it; `unless` words what may replace it (a warning then)."""
    if not isinstance(command, list) or not command:
        return
    first = command[0]
    if not isinstance(first, str) or "$(" in first or not any(ch.isspace() for ch in first):
        return
    words = first.split()
    yield obj_problem(ID, m, at,
                      f"{what} is '{_short(first)}': the runtime starts a program of that whole name "
                      "(no shell splits a command): the container fails to start unless the image has a file so "
                      f"named{unless}",
                      f"split it into words (command: {_words(words)}), or run it through a shell: "
                      f"command: [sh, -c, {_quoted(first)}]", severity=WARNING if unless else RULE_DEFAULT)


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def _words(words: list[str]) -> str:
    shown = words[:4] + (["..."] if len(words) > 4 else [])
    return "[" + ", ".join(shown) + "]"


def _quoted(text: str) -> str:
    return '"' + _short(text, 60).replace('"', '\\"') + '"'
