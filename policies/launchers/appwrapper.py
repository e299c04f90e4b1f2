"""AppWrapper (workload.codeflare.dev/v1beta2, project-codeflare/appwrapper tag v1.2.1, commit b47a99ee), the wrapper
Kueue admits as one unit. It starts no pods itself: once admitted, its controller creates each component's object
(`spec.components[i].template`: a PyTorchJob, JobSet, Job, Deployment ...) and that object's own controller starts
the pods. Here each component's object is a child of the AppWrapper (base.Child), checked by its own launcher module
and rules as if it were written in the file, every problem reported against the AppWrapper at
`spec.components[i].template...`.

What upstream does, at v1.2.1:
- internal/controller/appwrapper/resource_management.go:41-54 parseComponent: the object is the template as
  written, its namespace set to the AppWrapper's where it has none.
- resource_management.go:217-255 createComponent: the label `workload.codeflare.dev/appwrapper: <name>`
  (api/v1beta2/appwrapper_types.go:193 AppWrapperLabel) is merged into the object's labels and into the pod
  template of each of its PodSets, the labels already there kept first (internal/util/maps.go MergeKeepFirst); the
  annotations, node selectors, tolerations and scheduling gates Kueue assigns on admission (`podSetInfos`) are
  merged in the same way, and none of them reaches the env or the command torchrun reads.
- internal/webhook/appwrapper_webhook.go:133-238 validateAppWrapperCreate: what the webhook refuses (see
  `children`); pkg/utils/utils.go:239-296 getValueAtPath reads a PodSet path; utils.go:475-583 InferPodSets gives
  the PodSets of batch/v1 Job, jobset.x-k8s.io/v1alpha2 JobSet, kubeflow.org/v1 PyTorchJob, ray.io/v1 RayCluster
  and RayJob, v1 Pod, apps/v1 Deployment and StatefulSet; utils.go:586-622 ValidatePodSets compares them with the
  declared ones.

Not modelled: the webhook's RBAC check (a SubjectAccessReview against the user who creates it, off unless
`userRBACAdmissionCheck` is set), and the controller's retries (it deletes and creates the components again after
a failure, up to `workload.codeflare.dev.appwrapper/retryLimit`)."""
from __future__ import annotations

import copy
import re
from typing import Any

from ..kube.values import listing, mapping
from ..kube.objects import Manifest
from .base import Bundle, Check, Child, Launcher, Workload

GROUP = "workload.codeflare.dev"
KIND = "AppWrapper"
# api/v1beta2/appwrapper_types.go:193.
LABEL = "workload.codeflare.dev/appwrapper"
# appwrapper_webhook.go:229-235: Kueue admits at most 8 PodSets.
MAX_PODSETS = 8
HINT = "see the AppWrapper reference (project-codeflare/appwrapper v1.2.1 internal/webhook/appwrapper_webhook.go)"

# utils.go:475-583 InferPodSets: (group, version, kind) -> how its PodSets are found.
_JOB = ("batch", "v1", "Job")
_JOBSET = ("jobset.x-k8s.io", "v1alpha2", "JobSet")
_PYTORCHJOB = ("kubeflow.org", "v1", "PyTorchJob")
_RAYCLUSTER = ("ray.io", "v1", "RayCluster")
_RAYJOB = ("ray.io", "v1", "RayJob")
# utils.go:444-448 templatesForGVK: (path to the pod template, path to the replica count).
_TEMPLATES = {("", "v1", "Pod"): [("template", "")],
              ("apps", "v1", "Deployment"): [("template.spec.template", "template.spec.replicas")],
              ("apps", "v1", "StatefulSet"): [("template.spec.template", "template.spec.replicas")]}


class PathError(ValueError):
    pass


def value_at(obj: dict[str, Any], path: str) -> Any:
    """utils.go:239-296 getValueAtPath: `template.spec.x[2].y` within the component's object, which the path's first
    element, `template`, names."""
    processed = "template"
    if not path.startswith(processed):
        raise PathError("first element of the path must be 'template'")
    remaining = path[len(processed):]
    cursor: Any = obj
    while remaining:
        if remaining.startswith("["):
            end = remaining.find("]")
            if end < 0:
                raise PathError(f"at path position '{processed}' invalid array index '{remaining}'")
            if not re.fullmatch(r"[+-]?\d+", remaining[1:end]):  # strconv.Atoi
                raise PathError(f"at path position '{processed}' invalid index expression '{remaining[1:end]}'")
            index = int(remaining[1:end])
            if not isinstance(cursor, list):
                raise PathError(f"at path position '{processed}' found non-array value")
            if index < 0 or index >= len(cursor):
                raise PathError(f"at path position '{processed}' out of bounds index '{index}'")
            cursor = cursor[index]
            processed += remaining[:end]
            remaining = remaining[end + 1:]
        elif remaining.startswith("."):
            remaining = remaining[1:]
            processed += "."
            end = len(remaining)
            dot = remaining.find(".")
            if dot > 0:
                end = dot
            bracket = remaining.find("[")
            if 0 < bracket < end:
                end = bracket
            key = remaining[:end]
            if not isinstance(cursor, dict):
                raise PathError(f"at path position '{processed}' non-map value")
            if key not in cursor:
                raise PathError(f"at path position '{processed}' missing field '{key}'")
            cursor = cursor[key]
            remaining = remaining[len(key):]  # strings.TrimPrefix
            processed += key
        else:
            raise PathError(f"at path position '{processed}' invalid path element '{remaining}'")
    return cursor


def raw_template(obj: dict[str, Any], path: str) -> dict[str, Any]:
    """utils.go:226-237 GetRawTemplate, and GetPodTemplateSpec's first test (utils.go:52-65): a map with a `spec`
    map. (Upstream then decodes that spec as a v1.PodSpec; the schema stage checks the child's pod spec.)"""
    value = value_at(obj, path)
    if not isinstance(value, dict):
        raise PathError(f"at path position '{path}' non-map value")
    if not isinstance(value.get("spec"), dict):
        raise PathError(f"content at {path} does not contain a spec")
    return value


def _replicas(obj: dict[str, Any], path: str) -> int | None:
    """utils.go:208-224 GetReplicas: an integer at the path, else None (the caller's default stands)."""
    try:
        value = value_at(obj, path)
    except PathError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _infer_replicas(obj: dict[str, Any], path: str) -> int:
    """utils.go:405-435 inferReplicas: 1 where the path or the value is absent; a value that is not an integer is
    an error."""
    if not path:
        return 1
    parent, _, key = path.rpartition(".")
    holder = value_at(obj, parent) if parent else obj
    if not isinstance(holder, dict):
        raise PathError(f"at path position '{parent}' non-map value")
    value = holder.get(key)
    if value is None:
        return 1
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise PathError(f"at path position '{path}' non-int value {value}")


def _has(obj: dict[str, Any], path: str) -> bool:
    try:
        value_at(obj, path)
    except PathError:
        return False
    return True


def _items(obj: dict[str, Any], path: str) -> int:
    """How many items the list at `path` has (0 where there is none)."""
    try:
        value = value_at(obj, path)
    except PathError:
        return 0
    return len(value) if isinstance(value, list) else 0


def _job_pods(obj: dict[str, Any], job_spec: str) -> int:
    """A Job's pods at once as InferPodSets counts them (utils.go:481-488, 504-510): parallelism (1 where unset),
    no more than completions."""
    pods = _replicas(obj, job_spec + ".parallelism")
    pods = 1 if pods is None else pods
    completions = _replicas(obj, job_spec + ".completions")
    return completions if completions is not None and completions < pods else pods


def _ray_podsets(obj: dict[str, Any], prefix: str) -> list[tuple[str, int]]:
    out = [(prefix + "headGroupSpec.template", 1)]
    for i in range(_items(obj, prefix + "workerGroupSpecs")):
        group = f"{prefix}workerGroupSpecs[{i}]."
        if _has(obj, group + "template"):
            out.append((group + "template", _infer_replicas(obj, group + "replicas")))
    return out


def infer_podsets(template: dict[str, Any]) -> list[tuple[str, int]]:
    """utils.go:475-583 InferPodSets: (path, replicas) of each PodSet of a known group, version and kind; a path that
    does not lead to a pod template raises PathError."""
    obj = template
    api_version = str(template.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    gvk = (group, version, str(template.get("kind") or ""))
    out: list[tuple[str, int]] = []
    if gvk == _JOB:
        out.append(("template.spec.template", _job_pods(obj, "template.spec")))
    elif gvk == _JOBSET:
        for i in range(_items(obj, "template.spec.replicatedJobs")):
            prefix = f"template.spec.replicatedJobs[{i}]."
            if _has(obj, prefix + "template"):
                replicas = _replicas(obj, prefix + "replicas")
                out.append((prefix + "template.spec.template",
                            (1 if replicas is None else replicas) * _job_pods(obj, prefix + "template.spec")))
    elif gvk == _PYTORCHJOB:
        for rtype in ("Master", "Worker"):
            prefix = f"template.spec.pytorchReplicaSpecs.{rtype}."
            if _has(obj, prefix + "template"):
                out.append((prefix + "template", _infer_replicas(obj, prefix + "replicas")))
    elif gvk == _RAYCLUSTER:
        out += _ray_podsets(obj, "template.spec.")
    elif gvk == _RAYJOB:
        out += _ray_podsets(obj, "template.spec.rayClusterSpec.")
    else:
        out += [(path, _infer_replicas(obj, replicas)) for path, replicas in _TEMPLATES.get(gvk, [])
                if _has(obj, path)]
    for path, _ in out:
        try:
            raw_template(obj, path)
        except PathError as exc:
            raise PathError(f"{path} does not refer to a v1.PodSpecTemplate: {exc}") from None
    return out


def validate_podsets(declared: list[dict[str, Any]], inferred: list[tuple[str, int]]) -> str | None:
    """utils.go:586-622 ValidatePodSets: the declared PodSets against the inferred ones; None when they agree."""
    if not declared:
        return None
    paths: dict[str, dict[str, Any]] = {}
    for p in declared:
        path = str(p.get("path") or "")
        if path in paths:
            return f"multiple DeclaredPodSets with path '{path}'"
        paths[path] = p
    if inferred:
        if len(inferred) != len(declared):
            return f"DeclaredPodSet count {len(declared)} differs from inferred count {len(inferred)}"
        for path, replicas in inferred:
            if path not in paths:
                return f"PodSet with path '{path}' is missing"
            said = paths[path].get("replicas")
            said = 1 if said is None else said
            if said != replicas:
                return (f"replica count {said} differs from inferred count {replicas} for PodSet at path position "
                        f"'{path}'")
    return None


def _merge_keep_first(first: Any, second: dict[str, str]) -> dict[str, Any]:
    """internal/util/maps.go MergeKeepFirst: the keys of `first` win."""
    out = dict(second)
    out.update(mapping(first))
    return out


class AppWrapperLauncher(Launcher[Workload]):
    id = "appwrapper"
    order = 100
    upstream = "project-codeflare/appwrapper v1.2.1"
    title = "AppWrapper (its components' objects are checked by their own launchers)"
    kinds = ((GROUP, KIND),)
    # MCAD's AppWrapper (project-codeflare/multi-cluster-app-dispatcher v1.38.1 pkg/apis/controller/v1beta1/
    # appwrapper.go 55-79) wraps spec.resources.GenericItems, not components: it is not read as a v1beta2 one.
    unread_versions = ("v1beta1",)
    # Kueue's integration for it (FrameworkName, kubernetes-sigs/kueue v0.19.2
    # pkg/controller/jobs/appwrapper/appwrapper_controller.go:44)
    kueue_framework = "workload.codeflare.dev/appwrapper"
    starts_pods = False  # each component's own controller starts them
    # A suspended AppWrapper deploys no components (appwrapper_controller.go:171-173); Kueue suspends a queued one and
    # resumes it on admission (kubernetes-sigs/kueue v0.19.2 pkg/controller/jobs/appwrapper/appwrapper_controller.go:
    # 114, 179), so Argo CD must leave the field to Kueue (ARGO012).
    suspend_field = ("spec", "suspend")
    suspend_source = "project-codeflare/appwrapper v1.2.1 internal/controller/appwrapper/appwrapper_controller.go:171"

    def children(self, m: Manifest, bundle: Bundle) -> list[Child]:
        """Each component's object as the controller creates it (resource_management.go:41-54, 217-255)."""
        return self._read(m)[0]

    def refused(self, m: Manifest, bundle: Bundle) -> list[Check]:
        """What the AppWrapper webhook refuses (appwrapper_webhook.go:133-238 validateAppWrapperCreate)."""
        return self._read(m)[1]

    def _read(self, m: Manifest) -> tuple[list[Child], list[Check]]:
        """The webhook's checks and the components in one pass over them; worked out once per object."""
        found = m.__dict__.get("_appwrapper_components")
        if found is None:
            found = m.__dict__["_appwrapper_components"] = self._components(m)
        return found

    def _components(self, m: Manifest) -> tuple[list[Child], list[Check]]:
        checks: list[Check] = []

        def refuse(field: str, message: str, hint: str = HINT) -> None:
            checks.append(Check(field, f"the AppWrapper webhook refuses the AppWrapper: {message}", hint, obj=m))

        components = listing(mapping(m.obj.get("spec")).get("components"))
        namespace = m.namespace
        podsets = 0
        made: list[Child] = []
        for i, component in enumerate(components):
            component = mapping(component)
            where = f"spec.components[{i}]"
            template = component.get("template")
            if not isinstance(template, dict):
                refuse(f"{where}.template", "the template is not an object (failed to decode as JSON)")
                continue
            group = str(template.get("apiVersion") or "").rpartition("/")[0]
            if group == GROUP and template.get("kind") == KIND:
                refuse(f"{where}.template", "Nested AppWrappers are forbidden", "wrap the inner AppWrapper's "
                       "components directly")
                continue
            own_ns = str(mapping(template.get("metadata")).get("namespace") or "")
            if own_ns and namespace and own_ns != namespace:  # (an AppWrapper without one: where it is applied)
                refuse(f"{where}.template.metadata.namespace", f"AppWrappers cannot create objects in other "
                       f"namespaces (the component says '{own_ns}', the AppWrapper is in '{namespace}')",
                       "remove the component's namespace")
            obj = template
            declared = [mapping(p) for p in listing(component.get("podSets"))]
            paths_ok = True
            for j, ps in enumerate(declared):
                path = str(ps.get("path") or "")
                if not path:  # and, as upstream, the empty path is also read below (appwrapper_webhook.go:206-211)
                    refuse(f"{where}.podSets[{j}].path", "podspec must specify path")
                    paths_ok = False
                try:
                    raw_template(obj, path)
                except PathError as exc:
                    refuse(f"{where}.podSets[{j}].path", f"path '{path}' does not refer to a v1.PodSpecTemplate: "
                           f"{exc}", "point the path at the pod template (template.spec.template for a Job)")
                    paths_ok = False
            try:
                inferred = infer_podsets(template)
            except PathError as exc:
                refuse(f"{where}.template", f"error inferring PodSets: {exc}")
                inferred = None
            if inferred is not None:
                podsets += max(len(declared), len(inferred))
                wrong = validate_podsets(declared, inferred)
                if wrong:
                    refuse(f"{where}.podSets", wrong, "declare the PodSets the object has, with its replica counts, "
                           "or leave podSets out for a kind whose PodSets are inferred")
            child = self._created(m, template, [str(p.get("path")) for p in declared] if declared and paths_ok
                                  else [p for p, _ in inferred or []])
            made.append(Child(Manifest(child, m.source, m.index), m, f"{where}.template",
                              notes=[f"component {i} of {m.ref} (AppWrapper)"],
                              said_as=f"in the AppWrapper's component {i} ({child.get('kind') or 'no kind'})"))
        if podsets == 0:
            refuse("spec.components", "components contains no podspecs", "wrap at least one object that has pods")
        elif podsets > MAX_PODSETS:
            refuse("spec.components", f"components contains {podsets} podspecs; at most {MAX_PODSETS} are allowed",
                   "split it into several AppWrappers")
        # A refused AppWrapper creates nothing; its components are still checked, so that one run shows every fix.
        return made, checks

    @staticmethod
    def _created(m: Manifest, template: dict[str, Any], podset_paths: list[str]) -> dict[str, Any]:
        """The component's object as the controller creates it: the AppWrapper's namespace where it has none, the
        AppWrapper label on the object and on each PodSet's pod template (the labels written there kept first)."""
        obj = copy.deepcopy(template)
        meta = dict(mapping(obj.get("metadata")))
        if not meta.get("namespace") and m.namespace:
            meta["namespace"] = m.namespace
        label = {LABEL: m.name}
        meta["labels"] = _merge_keep_first(meta.get("labels"), label)
        obj["metadata"] = meta
        for path in podset_paths:
            try:
                pod_template = raw_template(obj, path)
            except PathError:
                continue
            pod_meta = pod_template.get("metadata")
            pod_meta = dict(pod_meta) if isinstance(pod_meta, dict) else {}
            pod_meta["labels"] = _merge_keep_first(pod_meta.get("labels"), label)
            pod_template["metadata"] = pod_meta
        return obj


LAUNCHER = AppWrapperLauncher()
