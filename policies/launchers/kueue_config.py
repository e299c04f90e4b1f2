"""Kueue's Configuration, where the manifests hold it: the one place that says which workloads the Kueue these
manifests deploy manages, and which requests its quota counts (kubernetes-sigs/kueue v0.19.2).

Kueue reads its Configuration from the file `controller_manager_config.yaml` of its ConfigMap `kueue-manager-config`
(config/components/manager/kustomization.yaml: `manager-config`, config/default/kustomization.yaml 9 `namePrefix:
kueue-`), strictly (pkg/config/config.go 55-66 fromFile: serializer.EnableStrict, an unknown or mistyped field is an
error), defaults it (apis/config/v1beta2/defaults.go 70-156) and validates it (pkg/config/validation.go 91-108); a
Configuration it cannot load or that fails validation stops the manager, and no webhook or controller of Kueue
runs. Where the manifests hold it, it is what Kueue runs once they are applied: its integrations stand in for the
environment's `kueueFrameworks` (in_force). Only these of its fields are read:

- `integrations.frameworks`: the integrations on (default `batch/job`, defaults.go 119-122; each a name Kueue knows,
  no two for one kind: validation.go 311-331).
- `manageJobsWithoutQueueName` (default false) and `managedJobsNamespaceSelector` (default: every namespace but
  kube-system and Kueue's own, defaults.go 124-132; it must not select either: validation.go 616-639). A job
  integration's webhook suspends an object without the queue label where the first is true and the namespace
  matches the selector (pkg/controller/jobframework/utils.go 131-157 WorkloadShouldBeSuspended); it first gives it
  the queue `default` where a LocalQueue of that name exists in its namespace and the namespace matches
  (defaults.go 59-98 ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector, constants.go 27). The reconciler
  skips every object of a namespace the selector does not match, labelled or not
  (jobframework/reconciler.go 324-339: ManagedJobsNamespaceSelectorAlwaysRespected, GA and locked on since v0.19,
  pkg/features/kube_features.go 734-738), and one without a queue name unless manageJobsWithoutQueueName
  (362-388).
- `resources.excludeResourcePrefixes`: requests whose name starts with one of them are not counted
  (pkg/workload/workload.go 463-478 dropExcludedResources, 677); `resources.quotaCheckStrategy` IgnoreUndeclared
  (behind the QuotaCheckStrategy gate, beta and on since v0.19: kube_features.go 871-874) leaves out resources the
  ClusterQueue does not cover (pkg/scheduler/flavorassigner/flavorassigner.go 294-296, 804-812), and refuses
  excludeResourcePrefixes beside it (validation.go 110-136); `resources.transformations` change what a request
  counts as (workload.go 554-): a pod set asking for a transformed resource is not judged here.
- `featureGates` (the QuotaCheckStrategy gate; gates given on the manager's command line are not read) and
  `namespace` (default: the one Kueue runs in, the ConfigMap's).

`waitForPodsReady` (on by default at v0.19: defaults.go 99-117, pkg/util/waitforpodsready/waitforpodsready.go 24-28)
acts only after admission (an admitted workload whose pods are not Ready in time is evicted and requeued): it changes
nothing of whether a queue ever admits a workload, and is not read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from ..kube.objects import Manifest
from ..kube.values import dig, listing, mapping, selects
from ..render.loader import InputError, check_bounds
from .base import Bundle
from .kueue import KUEUE_FRAMEWORKS
from .kueue_quota import NAMESPACE_NAME_LABEL
from .kueue_webhooks import invalid, label_selector

CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
GROUP = "config.kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
KIND = "Configuration"
SYSTEM_NAMESPACE = "kube-system"
DEFAULT_NAMESPACE = "kueue-system"  # defaults.go 33, where the service account's namespace cannot be read
DEFAULT_LOCAL_QUEUE = "default"     # pkg/controller/constants/constants.go 27 DefaultLocalQueueName
IGNORE_UNDECLARED, BLOCK_UNDECLARED = "IgnoreUndeclared", "BlockUndeclared"
QUOTA_CHECK_GATE = "QuotaCheckStrategy"
# The Configuration's fields (apis/config/<version>/configuration_types.go: Configuration and the ControllerManager
# it inlines); strict decoding refuses any other (config.go 61).
FIELDS = {"apiVersion", "kind", "namespace", "manageJobsWithoutQueueName", "managedJobsNamespaceSelector",
          "internalCertManagement", "waitForPodsReady", "clientConnection", "integrations", "multiKueue",
          "fairSharing", "admissionFairSharing", "resources", "featureGates", "objectRetentionPolicies", "webhook",
          "leaderElection", "metrics", "health", "pprofBindAddress", "controller", "tls"}
VERSION_FIELDS = {"v1beta2": {"visibilityServer"}, "v1beta1": {"queueVisibility"}}
RESOURCES_FIELDS = {"quotaCheckStrategy", "excludeResourcePrefixes", "transformations", "deviceClassMappings"}


@dataclass(frozen=True)
class KueueConfig:
    """A Configuration as Kueue runs it, defaulted; `manifest` is the ConfigMap that holds it."""

    manifest: Manifest
    namespace: str
    frameworks: tuple[str, ...]
    manage_without_queue_name: bool
    namespace_selector: dict[str, Any]
    exclude_prefixes: tuple[str, ...]
    ignore_undeclared: bool
    transformed: frozenset[str]

    @property
    def where(self) -> str:
        m = self.manifest
        return f"Kueue's Configuration (ConfigMap {m.namespace + '/' if m.namespace else ''}{m.name})"

    def manages_namespace(self, namespace: str, ns_obj: dict[str, Any] | None) -> bool | None:
        """Whether managedJobsNamespaceSelector selects the namespace: its labels are its Namespace object's where
        the manifests hold it, else only the name label the API server sets, and then only a selector on that label
        alone is judged (None: not settled here)."""
        sel = self.namespace_selector
        keys = set(mapping(sel.get("matchLabels"))) | {mapping(e).get("key") for e in
                                                      listing(sel.get("matchExpressions"))}
        if not namespace or (ns_obj is None and keys - {NAMESPACE_NAME_LABEL}):
            return None
        labels = {str(k): str(v) for k, v in mapping(dig(ns_obj or {}, "metadata", "labels")).items()}
        labels[NAMESPACE_NAME_LABEL] = namespace
        return selects(sel, labels)

    def counted(self, requests: dict[str, Any]) -> dict[str, Any]:
        """The requests Kueue's quota counts: those with an excluded prefix dropped (dropExcludedResources)."""
        return {k: v for k, v in requests.items() if not k.startswith(self.exclude_prefixes)}


def parse(text: str, source: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The Configuration document of the ConfigMap's file, within the loader's bounds; (None, [why]) where it is not
    YAML Kueue can decode. Read as YAML 1.1 (PyYAML), not as the manifests are (render/loader.py, go-yaml v3 like
    kustomize): Kueue decodes the file with apimachinery's serializer, sigs.k8s.io/yaml over go-yaml v2, which is
    YAML 1.1 (`on` and `yes` are booleans). Duplicate keys, which its strict decoding refuses, are not refused here."""
    try:
        check_bounds(text, source)
        doc = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except InputError as exc:
        return None, [str(exc)]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [f"invalid YAML{f' at line {mark.line + 1}' if mark else ''}: "
                      f"{getattr(exc, 'problem', None) or exc}"]
    if not isinstance(doc, dict):
        return None, ["not a Configuration: the file is not a mapping"]
    return doc, []


def problems(doc: dict[str, Any], home: str = DEFAULT_NAMESPACE) -> list[str]:
    """What stops Kueue from loading or validating the Configuration (strict decoding of the fields read here, and
    validation.go's checks of them), each as `field: what`. `home`: the namespace Kueue runs in, its `namespace`
    where the Configuration sets none (defaults.go 71, before validation)."""
    group, _, version = str(doc.get("apiVersion") or "").partition("/")
    if group != GROUP or version not in VERSIONS or doc.get("kind") != KIND:
        return [f"apiVersion/kind: {doc.get('apiVersion')}/{doc.get('kind')} is not a Kueue Configuration "
                f"(expected {GROUP}/v1beta2 or v1beta1, kind {KIND})"]
    out = [f"{k}: strict decoding error: unknown field \"{k}\"" for k in doc
           if k not in FIELDS | VERSION_FIELDS[version]]
    if not isinstance(doc.get("manageJobsWithoutQueueName", False), bool):
        out.append("manageJobsWithoutQueueName: expected a boolean")
    ns = doc.get("namespace") or home
    if not isinstance(ns, str):
        out.append("namespace: expected a string")
    sel = doc.get("managedJobsNamespaceSelector")
    if sel is not None:
        if not isinstance(sel, dict):
            out.append("managedJobsNamespaceSelector: expected a label selector")
        else:
            said = label_selector(sel, "managedJobsNamespaceSelector")
            out += said
            for name in (SYSTEM_NAMESPACE, ns if isinstance(ns, str) and ns else None):  # validation.go 619-636
                if not said and name and selects(sel, {NAMESPACE_NAME_LABEL: name}):
                    out.append(invalid("managedJobsNamespaceSelector", sel, f'should not match the "{name}" namespace'))
    integrations = doc.get("integrations")
    frameworks = mapping(integrations).get("frameworks") if integrations is not None else None
    if integrations is not None and not isinstance(integrations, dict):
        out.append("integrations: expected a mapping")
    elif frameworks is not None and not isinstance(frameworks, list):
        out.append("integrations.frameworks: expected a list")
    else:
        seen: set[str] = set()
        for i, f in enumerate(frameworks or []):
            if f not in KUEUE_FRAMEWORKS:
                out.append(f"integrations.frameworks[{i}]: Unsupported value: {f!r}: supported values: "
                           + ", ".join(f'"{k}"' for k in KUEUE_FRAMEWORKS))
            elif f in seen:
                out.append(f"integrations.frameworks[{i}]: Duplicate value: {f!r}")
            seen.add(str(f))
    res = doc.get("resources")
    if res is not None and not isinstance(res, dict):
        out.append("resources: expected a mapping")
    elif res is not None:
        out += [f"resources.{k}: strict decoding error: unknown field \"resources.{k}\"" for k in res
                if k not in RESOURCES_FIELDS]
        prefixes = res.get("excludeResourcePrefixes")
        if prefixes is not None and (not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes)):
            out.append("resources.excludeResourcePrefixes: expected a list of strings")
        strategy = res.get("quotaCheckStrategy")
        if strategy is not None and _gate_on(doc):
            if strategy not in (IGNORE_UNDECLARED, BLOCK_UNDECLARED):
                out.append(f'resources.quotaCheckStrategy: Unsupported value: "{strategy}": supported values: '
                           f'"{IGNORE_UNDECLARED}", "{BLOCK_UNDECLARED}"')
            elif strategy == IGNORE_UNDECLARED and prefixes:
                out.append(invalid("resources.quotaCheckStrategy", strategy,
                                   "excludeResourcePrefixes is not allowed when quotaCheckStrategy is IgnoreUndeclared"))
        if res.get("transformations") is not None and not isinstance(res.get("transformations"), list):
            out.append("resources.transformations: expected a list")
    gates = doc.get("featureGates")
    if gates is not None and (not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values())):
        out.append("featureGates: expected a map of feature names to booleans")
    return out


def _gate_on(doc: dict[str, Any]) -> bool:
    gates = doc.get("featureGates")
    value = gates.get(QUOTA_CHECK_GATE, True) if isinstance(gates, dict) else True
    return value is not False


def read(m: Manifest, doc: dict[str, Any]) -> KueueConfig:
    """The defaulted Configuration (defaults.go 70-156) of a document `problems` finds nothing wrong with. Kueue's
    namespace, unset, is the one its service account runs in: the ConfigMap's, which it mounts."""
    ns = str(doc.get("namespace") or m.namespace or DEFAULT_NAMESPACE)
    frameworks = tuple(str(f) for f in listing(mapping(doc.get("integrations")).get("frameworks"))) or ("batch/job",)
    sel = doc.get("managedJobsNamespaceSelector")
    selector = sel if isinstance(sel, dict) else {"matchExpressions": [
        {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": [SYSTEM_NAMESPACE, ns]}]}
    res = mapping(doc.get("resources"))
    return KueueConfig(
        manifest=m, namespace=ns, frameworks=frameworks,
        manage_without_queue_name=doc.get("manageJobsWithoutQueueName") is True, namespace_selector=selector,
        exclude_prefixes=tuple(str(p) for p in listing(res.get("excludeResourcePrefixes"))),
        ignore_undeclared=res.get("quotaCheckStrategy") == IGNORE_UNDECLARED and _gate_on(doc),
        transformed=frozenset(str(mapping(t).get("input")) for t in listing(res.get("transformations"))))


def config_maps(manifests: list[Manifest]) -> list[Manifest]:
    """Kueue's ConfigMaps among the manifests: v1 ConfigMaps named kueue-manager-config with the file."""
    return [m for m in manifests if m.kind == "ConfigMap" and m.api_version == "v1" and m.name == CONFIG_MAP
            and isinstance(mapping(m.obj.get("data")).get(CONFIG_KEY), str)]


def configuration(manifests: list[Manifest]) -> tuple[KueueConfig | None, list[tuple[Manifest, str]]]:
    """Kueue's Configuration where the manifests hold its ConfigMap (the first, where several), and what stops
    Kueue from loading it (the ConfigMap, `field: what`); None where they hold none or it does not load."""
    found = config_maps(manifests)
    if not found:
        return None, []
    m = found[0]
    doc, why = parse(str(m.obj["data"][CONFIG_KEY]), f"{m.source}: ConfigMap {m.name} data.{CONFIG_KEY}")
    why = why or problems(doc or {}, m.namespace or DEFAULT_NAMESPACE)
    if why or doc is None:
        return None, [(m, w) for w in why]
    return read(m, doc), []


def configuration_of(bundle: Bundle) -> tuple[KueueConfig | None, list[tuple[Manifest, str]]]:
    """`configuration` of a bundle's manifests, read once per bundle (the engine, the rules' Context and ADM003 ask)."""
    return bundle.derived("kueue-configuration", lambda b: configuration(b.manifests))


def in_force(bundle: Bundle, declared: list[str] | None) -> list[str] | None:
    """The Kueue integrations on: the Configuration's where the manifests hold one Kueue loads (what the cluster runs
    once they are applied), else the environment's `kueueFrameworks` (`declared`); None where neither says."""
    cfg, _ = configuration_of(bundle)
    return list(cfg.frameworks) if cfg is not None else declared
