"""The pods' PriorityClass and RuntimeClass admit them.

Two admission plugins on in every cluster (kube-apiserver's default set) read a class object for each pod created:
Priority its `priorityClassName` (or the cluster's globalDefault PriorityClass; a Volcano Job's pods carry the Job's
`spec.priorityClassName` where their task's template names none), RuntimeClass its `runtimeClassName`
(`policies/kube/admission_classes.py`, ported from kubernetes plugin/pkg/admission/priority/admission.go, the v1.36
text, and plugin/pkg/admission/runtimeclass/admission.go @fd18d233ad41). Where the class is in the manifests (or is
one of the two system PriorityClasses every cluster has), what they refuse follows from the manifests alone, and
each pod the controller creates is refused while the workload itself is accepted: an error.

- Priority: a pod that states `priority` (or `preemptionPolicy`) other than its class's (`the integer value of
  priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given
  PriorityClass name`). The system classes are allowed in every namespace (the kube-system restriction went in
  1.17). A pod naming no class gets the manifests' globalDefault PriorityClass (the lowest of several).
- RuntimeClass: a pod that sets `overhead` other than its RuntimeClass's `overhead.podFixed` (`pod rejected: Pod's
  Overhead doesn't match RuntimeClass's defined Overhead`), or sets one with no RuntimeClass, or one without an
  overhead (`pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead`); a
  `nodeSelector` key the RuntimeClass's `scheduling.nodeSelector` sets to another value (`conflict:
  runtimeClass.scheduling.nodeSelector[pool] = gvisor; pod.spec.nodeSelector[pool] = gpu`).
- The PriorityClasses themselves (the API server's ValidatePriorityClass): a value over 1000000000 on a class not
  named `system-` (`maximum allowed value of a user defined priority is 1000000000`); a `system-` name other than
  `system-node-critical` and `system-cluster-critical`, or one of those with another value or `globalDefault: true`
  (`priority class names with 'system-' prefix are reserved for system use only`); a `preemptionPolicy` other than
  `PreemptLowerPriority` or `Never`; and two globalDefault classes (the one applied second is refused:
  `PriorityClass x is already marked as default. Only one default can exist`). A refused class is never created:
  the pods naming it are judged as naming a class the cluster does not have.

The pods the other rules check (RES009's quota, RES010's Kueue pod sets, ADM001's policies) are these pods as the
plugins admit them: the RuntimeClass's overhead, node selector and tolerations merged in, the class's priority set.
A class not in the manifests is REF001's (listed, or an error where the environment is self-contained); a pod that
states its own `priority` beside a class not in them (or, naming none, a value other than 0 where the manifests hold
no globalDefault class) is a warning phrased as the condition under which the plugin refuses it; so is a refusal in
a runtime's pod template the manifests do not hold.

Fails: a Job's pods with `runtimeClassName: kata` and `nodeSelector: {pool: gpu}` beside a RuntimeClass `kata` whose
scheduling selects `pool: kata`; a pod with `priority: 5` and `priorityClassName: high` (value 1000); two
globalDefault PriorityClasses; a PriorityClass `system-training`; one with `preemptionPolicy: Preempt`; a Volcano
Job with `priorityClassName: high` whose task template states `priority: 5`.
Passes: the same pods with the RuntimeClass's own node selector; a PriorityClass in the manifests the pods name.
Warns: `priority: 5` beside `priorityClassName: training-high`, a class the manifests do not hold.
"""
from __future__ import annotations

from typing import Any, Iterator

from ..kube.admission_classes import PRIORITY_API, default_class, priority_classes, validate_priority_class
from ..kube.objects import ERROR, WARNING, Problem
from .kit import Context, obj_problem
from .sec010_pod_security import pod_views

ID = "ADM002"
NAME = "priority-runtime-classes"
SEVERITY = ERROR
CLASS_HINTS = {"value": "give it a value of at most 1000000000 (only the system classes have more)",
               "metadata.name": "name it without the system- prefix (the two system classes exist in every cluster: "
                                "name them in the pods, do not apply them)",
               "preemptionPolicy": "set preemptionPolicy to PreemptLowerPriority or Never, or leave it out"}
HINTS = {"Priority": "leave spec.priority and spec.preemptionPolicy to the Priority plugin (set priorityClassName)",
         "RuntimeClass": "leave spec.overhead to the RuntimeClass, and give the pods no nodeSelector value that "
                         "contradicts its scheduling.nodeSelector"}


def check(ctx: Context) -> Iterator[Problem]:
    classes = [m for m in ctx.of_kind("PriorityClass") if m.api_version == PRIORITY_API
               and m.ref not in ctx.schema_refused]
    # A class the API server refuses is never created: it is not a second default (priority_classes leaves it out).
    defaults = [m for m in classes if m.obj.get("globalDefault") is True and not validate_priority_class(m.obj)]
    for m in classes:
        for field, says in validate_priority_class(m.obj):
            yield obj_problem(ID, m, field, f"the API server refuses the PriorityClass: {says}", CLASS_HINTS[field])
    for m in defaults[1:]:
        yield obj_problem(ID, m, "globalDefault", f"PriorityClass '{defaults[0].name}' is globalDefault too: the one "
                          f"applied second is refused (PriorityClass {defaults[0].name} is already marked as default. "
                          "Only one default can exist)", "mark one PriorityClass globalDefault")
    known = priority_classes([m.obj for m in classes])
    for view in pod_views(ctx):
        unknown = _unknown_priority(view.written, known)
        if unknown:
            yield obj_problem(ID, view.manifest, f"{view.field}.priority", f"the pods state priority "
                              f"{view.written['priority']}, which the Priority admission plugin refuses {unknown} (the "
                              "integer value of priority must not be provided in pod spec)", HINTS["Priority"],
                              severity=WARNING)
        for plugin, says in view.refusals:
            conditions = view.conditions(False)
            key = "priorityClassName" if plugin == "Priority" else "runtimeClassName"
            field = f"{view.field}.{key}" if view.written.get(key) else view.field
            text = f"the API server's {plugin} admission refuses these pods: {says}"
            if conditions:
                text += f" ({'; '.join(conditions)})"
            p = obj_problem(ID, view.manifest, field, text, HINTS[plugin], severity=WARNING if conditions else ERROR)
            if not conditions:
                p.extra["pods_refused"] = True  # make plan: none of these pods is created
            yield p


def _unknown_priority(written: dict[str, Any], known: dict[str, dict[str, Any]]) -> str | None:
    """The condition under which a pod's own `priority` is refused where its class is not in the manifests: the class
    it names has another value, or (naming none, a value other than 0) the cluster has no globalDefault of it."""
    own, name = written.get("priority"), written.get("priorityClassName")
    if own is None:
        return None
    if name:
        return None if name in known else f"if PriorityClass '{name}' (not in these manifests) has another value"
    if default_class(known) is None and own != 0:
        return f"unless the cluster has a globalDefault PriorityClass of value {own} (without one it computes 0)"
    return None
