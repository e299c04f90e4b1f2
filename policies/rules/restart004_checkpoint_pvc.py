"""A workload that can restart keeps its checkpoints on a PersistentVolumeClaim the trainer resumes from.

Every torchrun restart restarts all workers; a re-created pod starts with empty `emptyDir`s. Unless the trainer
saves checkpoints to storage that outlives the pod and loads the newest one at start, each restart (a failure, a
preemption, an elastic membership change) begins again from epoch 0 on every GPU. The rule applies when something
can restart the world: torchrun `--max-restarts` above 0 or an elastic range, a PyTorchJob restart policy other than
`Never` (with a non-zero `backoffLimit`) or an `elasticPolicy`, a StatefulSet, a Job with `backoffLimit` above 0, a
JobSet (or runtime) `failurePolicy.maxRestarts`. The checkpoint folder is read from the script's flags
(`--out-dir`, `--checkpoint-dir`, `--output-dir`, `--save-dir`, `--ckpt-dir`) or env (`OUT_DIR`,
`CHECKPOINT_DIR`, ...); this repository's trainer (`trainer/train.py`) saves to and resumes from
`<out-dir>/<run-id>/`, `/out` by default. The folder must be under a writable mount of a PersistentVolumeClaim.
A warning: a run without a durable checkpoint still trains, it only wastes every restart.

Fails: a StatefulSet running `trainer/train.py` with `/out` on an `emptyDir`; a PyTorchJob with
`restartPolicy: OnFailure` whose script shows no checkpoint folder.
Passes: `/out` mounted from `persistentVolumeClaim: {claimName: outputs-pvc}`; an Indexed Job with
`backoffLimit: 0` and `restartPolicy: Never` (it never restarts).
"""
from __future__ import annotations

import posixpath
from typing import Iterator

from ..kube.objects import WARNING, Problem
from ..model.recovery import restarts_and_max_restarts
from ..model.topology import PodView, Topology
from .kit import Context, problem_at

ID = "RESTART004"
NAME = "checkpoint-on-pvc"
SEVERITY = WARNING
CKPT_FLAGS = {"--out-dir", "--out_dir", "--output-dir", "--output_dir", "--checkpoint-dir", "--checkpoint_dir",
              "--ckpt-dir", "--ckpt_dir", "--save-dir", "--save_dir", "--checkpoint-path", "--checkpoint_path"}
CKPT_ENV = ("OUT_DIR", "CHECKPOINT_DIR", "CKPT_DIR", "OUTPUT_DIR", "SAVE_DIR")
REPO_TRAINER = ("trainer/train.py", "/out")


def restart_reasons(ctx: Context, t: Topology) -> list[str]:
    why: list[str] = []
    restarts, max_restarts = restarts_and_max_restarts(ctx, t)
    if max_restarts is not None:
        mr = max_restarts.value
        if mr.isdigit() and int(mr) > 0:
            why.append(f"torchrun --max-restarts {mr}")
    if t.elastic:
        why.append("an elastic node range")
    return why + restarts


def checkpoint_folder(v: PodView) -> tuple[str | None, str]:
    """The folder the script checkpoints to, and how it was found."""
    tokens = list(v.inv.script_args) if v.inv is not None else v.pod.argv()[0]
    script = v.inv.script if v.inv is not None else None
    for i, tok in enumerate(tokens):
        name, sep, value = tok.partition("=")
        if name in CKPT_FLAGS:
            value = value if sep else (tokens[i + 1] if i + 1 < len(tokens) else "")
            return value, f"{name}"
    for name in CKPT_ENV:
        if v.pod.env.get(name):
            return str(v.pod.env[name]), f"env {name}"
    if script and script.endswith(REPO_TRAINER[0]):
        return REPO_TRAINER[1], f"{script}'s default --out-dir"
    return None, ""


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        why = restart_reasons(ctx, t)
        if not why:
            continue
        v = t.first
        pod = v.pod
        folder, how = checkpoint_folder(v)
        reason = ", ".join(why)
        if not folder:
            yield problem_at(ID, ctx, t, v.inv.field if v.inv else pod.container_field,
                             f"the world can restart ({reason}) but no checkpoint folder is visible in the script's "
                             "flags or env: a restart begins again from epoch 0",
                             "checkpoint to a folder on a PersistentVolumeClaim and resume from it (e.g. --out-dir)",
                             severity=WARNING)
            continue
        if "$" in folder or not folder.startswith("/"):
            continue
        folder = posixpath.normpath(folder)
        best = None
        for i, mt in enumerate(pod.container.get("volumeMounts") or []):
            if not isinstance(mt, dict):
                continue
            path = posixpath.normpath(str(mt.get("mountPath") or "/"))
            if folder == path or folder.startswith(path.rstrip("/") + "/"):
                if best is None or len(path) > len(best[2]):
                    best = (i, mt, path)
        if best is None:
            yield problem_at(ID, ctx, t, f"{pod.container_field}.volumeMounts",
                             f"the world can restart ({reason}) but checkpoints ({how}) go to {folder} inside the "
                             "container, lost with it", f"mount a PersistentVolumeClaim at {folder}", severity=WARNING)
            continue
        i, mt, path = best
        name = str(mt.get("name"))
        j, vol = None, {}
        for k, candidate in enumerate(pod.spec.get("volumes") or []):
            if isinstance(candidate, dict) and str(candidate.get("name")) == name:
                j, vol = k, candidate  # (the last of that name, should there be two)
        pvc = vol.get("persistentVolumeClaim")
        field = f"{pod.spec_field}.volumes[{j}]" if j is not None else f"{pod.container_field}.volumeMounts[{i}]"
        if not isinstance(pvc, dict):
            kind = next((k for k in vol if k != "name"), "no volume")
            yield problem_at(ID, ctx, t, field, f"the world can restart ({reason}) but checkpoints ({how}) go to "
                             f"{folder} on volume '{mt.get('name')}' ({kind}), lost with the pod",
                             "make that volume a persistentVolumeClaim", severity=WARNING)
        elif mt.get("readOnly") or pvc.get("readOnly"):
            yield problem_at(ID, ctx, t, field, f"checkpoints ({how}) go to {folder}, mounted read-only",
                             "mount the checkpoint volume read-write", severity=WARNING)
