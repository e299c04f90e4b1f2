"""Dynamic Resource Allocation (resource.k8s.io): the objects a pod's claims name, and what follows where one is
missing. Nothing refuses such a pod at admission; it stays Pending:

- `spec.resourceClaims[].resourceClaimName` (core/v1 PodResourceClaim): the scheduler's DynamicResources plugin
  keeps the pod out of the active queue until the ResourceClaim exists (pkg/scheduler/framework/plugins/
  dynamicresources/dynamicresources.go PreEnqueue -> foreachPodResourceClaim: the claim's Get error is returned as
  Unschedulable; the resource.k8s.io/v1 text of the v1.35/v1.36 line, with SignPlugin).
- `spec.resourceClaims[].resourceClaimTemplateName`: the resourceclaim controller makes the pod's claim from the
  template and, where the template does not exist, records `FailedResourceClaimCreation` (`resource claim template
  "x": ... not found`) and retries (pkg/controller/resourceclaim/controller.go syncPod -> handleClaim,
  @003e86297d18); without the claim the scheduler keeps the pod out as above.
- A ResourceClaim's (a ResourceClaimTemplate's `spec.spec`) `devices.requests[]`: in resource.k8s.io/v1 and v1beta2
  `exactly.deviceClassName` or `firstAvailable[].deviceClassName`, in v1beta1 `deviceClassName` on the request
  itself. PreFilter checks every request's class (every subrequest's) of a claim not yet allocated and, where one
  does not exist, the pod is Unschedulable (`request r: device class x does not exist`, validateDeviceClass) until a
  DeviceClass event.

A ResourceClaimTemplate may also come from a controller: NVIDIA's DRA driver makes one for each ComputeDomain
(resource.nvidia.com), named by its `spec.channel.resourceClaimTemplate.name`, in its namespace
(NVIDIA/k8s-dra-driver-gpu cmd/compute-domain-controller/computedomain.go onAddOrUpdate ->
resourceClaimTemplateManager.Create @5321f9cde600); that template is in the manifests where its ComputeDomain is."""
from __future__ import annotations

from typing import Any, Iterator

from .values import listing, mapping

GROUP = "resource.k8s.io"
CLAIM = "ResourceClaim"
CLAIM_TEMPLATE = "ResourceClaimTemplate"
DEVICE_CLASS = "DeviceClass"
WAITS = {CLAIM: "the scheduler keeps every pod that names it Pending (resourceclaim \"{}\" not found)",
         CLAIM_TEMPLATE: "the resourceclaim controller cannot make the pods' claim (FailedResourceClaimCreation: "
                         "resource claim template \"{}\" not found), so the scheduler keeps them Pending",
         DEVICE_CLASS: "the scheduler keeps every pod whose claim asks for it Pending (device class {} does not "
                       "exist)"}


NVIDIA_GROUP = "resource.nvidia.com"
COMPUTE_DOMAIN = "ComputeDomain"


def made_templates(objs: list[tuple[str, str, str, dict[str, Any]]]) -> Iterator[tuple[str, str, str]]:
    """(kind, namespace, name) of the ResourceClaimTemplates controllers make from these (api version, kind,
    namespace, object) tuples: a ComputeDomain's channel template."""
    for api_version, kind, namespace, obj in objs:
        if kind == COMPUTE_DOMAIN and api_version.split("/")[0] == NVIDIA_GROUP:
            name = mapping(mapping(mapping(obj.get("spec")).get("channel")).get("resourceClaimTemplate")).get("name")
            if isinstance(name, str) and name:
                yield CLAIM_TEMPLATE, namespace, name


def pod_claims(spec: dict[str, Any]) -> Iterator[tuple[str, str, int]]:
    """(kind, name, index) for each entry of a pod spec's `resourceClaims` naming a ResourceClaim or a template."""
    for i, claim in enumerate(listing(spec.get("resourceClaims"))):
        claim = mapping(claim)
        for key, kind in (("resourceClaimName", CLAIM), ("resourceClaimTemplateName", CLAIM_TEMPLATE)):
            name = claim.get(key)
            if isinstance(name, str) and name:
                yield kind, name, i


def device_classes(kind: str, obj: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(DeviceClass name, field) for each device request of a ResourceClaim or ResourceClaimTemplate, in any served
    version's shape."""
    spec = mapping(obj.get("spec"))
    prefix = "spec"
    if kind == CLAIM_TEMPLATE:
        spec, prefix = mapping(spec.get("spec")), "spec.spec"
    for i, request in enumerate(listing(mapping(spec.get("devices")).get("requests"))):
        request = mapping(request)
        where = f"{prefix}.devices.requests[{i}]"
        for sub, field in ((request, where), (mapping(request.get("exactly")), f"{where}.exactly")):
            name = sub.get("deviceClassName")
            if isinstance(name, str) and name:
                yield name, f"{field}.deviceClassName"
        for j, sub in enumerate(listing(request.get("firstAvailable"))):
            name = mapping(sub).get("deviceClassName")
            if isinstance(name, str) and name:
                yield name, f"{where}.firstAvailable[{j}].deviceClassName"
