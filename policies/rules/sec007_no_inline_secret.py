"""No Secret carries its data in the repository; pods reference Secrets by name.

Whatever is in git is readable by everyone with the repository, for ever, in every clone and fork: a Secret with
`data` or `stringData` (a `secretGenerator` with literals or files makes one too) publishes its values. Create
Secrets outside git (an external secrets operator, sealed secrets, the platform) and reference them by name
(`secretRef`, `secretKeyRef`, `optional: true` where the job can run without).

Fails: a Secret `hf-token` with `stringData: {HF_TOKEN: hf_...}`.
Passes: `envFrom: [{secretRef: {name: hf-token, optional: true}}]` and no Secret object.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import WARNING, Problem

from .kit import Context, obj_problem

ID = "SEC007"
NAME = "no-inline-secret"
SEVERITY = WARNING
KINDS = ("Secret",)


def check(ctx: Context) -> Iterator[Problem]:
    for m in ctx.bundle.manifests:
        if m.kind != "Secret":
            continue
        for key in ("data", "stringData"):
            values = m.obj.get(key)
            if values:
                names = ", ".join(sorted(str(k) for k in values)[:5])
                yield obj_problem(ID, m, key, f"Secret '{m.name}' carries {key} ({names}) in the repository",
                                  "remove the Secret from git; create it in the cluster and reference it by name")
