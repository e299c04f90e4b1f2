"""The headless Service selects the training pods.

DNS records exist only for pods the Service selects. Labels added by the controller count: `job-name`,
`batch.kubernetes.io/job-completion-index`, `apps.kubernetes.io/pod-index` and the pod template's own labels.
A selector left behind by a rename, or an empty selector, leaves pod 0 without a DNS name.

Fails: selector `app: trainer` on pods labelled `app.kubernetes.io/name: ddp-train`.
Passes: selector `job-name: pytorchworker` (added by the Job controller) for Job `pytorchworker`.
"""
from __future__ import annotations

from typing import Iterator

from ..kube.objects import Problem
from .kit import Context, service_problem

ID = "TOPO005"
NAME = "service-selects-pods"


def check(ctx: Context) -> Iterator[Problem]:
    for t in ctx.topologies:
        if t.service is None:
            continue
        selector = (t.service.obj.get("spec") or {}).get("selector") or {}
        labels = t.first.pod.labels
        if not selector:
            yield service_problem(ID, t, "spec.selector", f"Service '{t.service.name}' has no selector, so it "
                                      "publishes no pod names", f"select the pods, e.g. {_suggest(labels)}")
            continue
        wrong = {k: v for k, v in selector.items() if labels.get(str(k)) != str(v)}
        if wrong:
            found = ", ".join(f"{k}={v}" for k, v in wrong.items())
            yield service_problem(ID, t, "spec.selector", f"selector {found} does not match the pods of "
                                      f"{t.manifest.ref} (pod labels: {_suggest(labels)})",
                                      "select on a label the pod template sets")


def _suggest(labels: dict[str, str]) -> str:
    keys = [k for k in labels if not k.startswith(("batch.kubernetes.io/job-completion-index", "apps.kubernetes.io/pod-index",
                                                   "statefulset.kubernetes.io/pod-name"))]
    return ", ".join(f"{k}={labels[k]}" for k in keys[:3]) or "(none)"
