"""The Dynamic Resource Allocation references (policies/kube/dra.py) REF001 lists: a pod's claims and claim
templates (core/v1 PodResourceClaim), and the DeviceClasses of a claim's requests in each served version's shape
(resource.k8s.io/v1 and v1beta2 `exactly` and `firstAvailable`, v1beta1 on the request itself)."""
from __future__ import annotations

from policies.kube import dra


def test_pod_claims_name_a_claim_or_a_template():
    spec = {"resourceClaims": [{"name": "a", "resourceClaimName": "shared-gpu"},
                               {"name": "b", "resourceClaimTemplateName": "single-gpu"},
                               {"name": "c"}, "odd"]}
    assert list(dra.pod_claims(spec)) == [(dra.CLAIM, "shared-gpu", 0), (dra.CLAIM_TEMPLATE, "single-gpu", 1)]
    assert list(dra.pod_claims({})) == []


def test_device_classes_of_a_v1_template_exactly_and_first_available():
    template = {"spec": {"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}},
        {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "big.example.com"},
                                           {"name": "small", "deviceClassName": "small.example.com"}]}]}}}}
    assert list(dra.device_classes(dra.CLAIM_TEMPLATE, template)) == [
        ("gpu.example.com", "spec.spec.devices.requests[0].exactly.deviceClassName"),
        ("big.example.com", "spec.spec.devices.requests[1].firstAvailable[0].deviceClassName"),
        ("small.example.com", "spec.spec.devices.requests[1].firstAvailable[1].deviceClassName")]


def test_device_classes_of_a_v1beta1_claim():
    claim = {"spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com"}]}}}
    assert list(dra.device_classes(dra.CLAIM, claim)) == [("gpu.example.com",
                                                           "spec.devices.requests[0].deviceClassName")]
    assert list(dra.device_classes(dra.CLAIM, {"spec": {"devices": {"requests": None}}})) == []


def test_a_compute_domains_channel_template_is_made_by_nvidias_driver():
    cd = {"spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "imex-channel"}}}}
    assert list(dra.made_templates([("resource.nvidia.com/v1beta1", "ComputeDomain", "train", cd)])) == [
        (dra.CLAIM_TEMPLATE, "train", "imex-channel")]
    assert list(dra.made_templates([("example.com/v1", "ComputeDomain", "train", cd)])) == []


def test_ref001_finds_the_template_a_compute_domain_makes():
    """tests/corpus/jobset/cluster-toolkit-a4x-max-bm-nccl-jobset.yaml: the JobSet's pods claim the ComputeDomain's
    channel template and a ResourceClaimTemplate of the file, whose DeviceClass mrdma.google.com the cluster holds.
    The REF001 line lists the DeviceClass only."""
    from conftest import FIXTURES
    from test_rules import problems_of
    path = FIXTURES.parent / "corpus/jobset/cluster-toolkit-a4x-max-bm-nccl-jobset.yaml"
    [line] = [p.message for p in problems_of(path) if p.rule == "REF001"]
    assert "DeviceClass mrdma.google.com" in line and "ResourceClaimTemplate" not in line
