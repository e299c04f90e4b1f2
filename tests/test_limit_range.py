"""The LimitRanger port (policies/kube/limit_range.py) on upstream's own unit cases: kubernetes
plugin/pkg/admission/limitranger/admission_test.go (TestDefaultContainerResourceRequirements,
TestMergePodResourceRequirements, TestPodLimitFunc's compute and ephemeral-storage cases), with the API server's
defaulting of both objects (pkg/apis/core/v1/defaults.go) and resource.Quantity's String()."""
from __future__ import annotations

import pytest

from policies.kube.limit_range import admit, canonical, containers, items, mutate, validate
from policies.kube.values import parse_quantity


def rl(cpu="", memory="", storage=""):
    out = {}
    if cpu:
        out["cpu"] = cpu
    if memory:
        out["memory"] = memory
    if storage:
        out["ephemeral-storage"] = storage
    return out


def limit_range(kind, min_=None, max_=None, default=None, default_request=None, ratio=None):
    """createLimitRange: one item of `kind`."""
    item = {"type": kind}
    for key, value in (("min", min_), ("max", max_), ("default", default), ("defaultRequest", default_request),
                       ("maxLimitRequestRatio", ratio)):
        if value:
            item[key] = value
    return {"spec": {"limits": [item]}}


def valid_limit_range():
    return {"spec": {"limits": [
        {"type": "Pod", "max": rl("200m", "4Gi"), "min": rl("50m", "2Mi")},
        {"type": "Container", "max": rl("100m", "2Gi"), "min": rl("25m", "1Mi"), "default": rl("75m", "10Mi"),
         "defaultRequest": rl("50m", "5Mi")}]}}


def pod(n, requests=None, limits=None, inits=()):
    """validPod / validPodInit: n containers with the same resources, then init containers."""
    def res(req, lim):
        r = {}
        if req:
            r["requests"] = dict(req)
        if lim:
            r["limits"] = dict(lim)
        return r
    spec = {"containers": [{"name": f"foo-{i}", "resources": res(requests, limits)} for i in range(n)]}
    if inits:
        spec["initContainers"] = [{"name": f"foo-{i}", "resources": res(req, lim)} for i, (req, lim) in enumerate(inits)]
    return spec


def as_text(qs):
    return {k: canonical(q) for k, q in qs.items()}


def test_default_container_resource_requirements():
    container = next(i for i in items(valid_limit_range()) if i.type == "Container")
    assert as_text(container.default_request) == {"cpu": "50m", "memory": "5Mi"}
    assert as_text(container.default) == {"cpu": "75m", "memory": "10Mi"}


def test_limit_range_item_defaults():
    """SetDefaults_LimitRangeItem: default from max, defaultRequest from default, else from min; Pod items untouched."""
    (item,) = items(limit_range("Container", min_=rl("10m", "1Mi"), max_=rl("2"), default=rl(memory="64Mi")))
    assert as_text(item.default) == {"cpu": "2", "memory": "64Mi"}
    assert as_text(item.default_request) == {"cpu": "2", "memory": "64Mi"}
    (item,) = items(limit_range("Container", min_=rl("10m")))
    assert as_text(item.default) == {} and as_text(item.default_request) == {"cpu": "10m"}
    (item,) = items(limit_range("Pod", max_=rl("2")))
    assert item.default == {} and item.default_request == {}


def test_merge_pod_resource_requirements():
    lr = [items(valid_limit_range())]
    p = containers(pod(1))
    assert mutate(lr, p) == ["cpu, memory request for container foo-0", "cpu, memory limit for container foo-0"]
    assert as_text(p[0].requests) == {"cpu": "50m", "memory": "5Mi"} and as_text(p[0].limits) == {"cpu": "75m",
                                                                                                  "memory": "10Mi"}
    # "pod with some resources enumerated should only merge empty": the init container alike.
    p = containers(pod(1, rl(memory="512Mi"), inits=[(rl(memory="512Mi"), None)]))
    assert mutate(lr, p) == ["cpu request for container foo-0", "cpu, memory limit for container foo-0",
                             "cpu request for init container foo-0", "cpu, memory limit for init container foo-0"]
    for c in p:
        assert as_text(c.requests) == {"cpu": "50m", "memory": "512Mi"}
    # all enumerated: nothing merged, no annotation
    p = containers(pod(1, rl("100m", "512Mi"), rl("200m", "1G"), inits=[(rl("200m", "1G"), rl("400m", "2G"))]))
    assert mutate(lr, p) == []
    assert as_text(p[1].limits) == {"cpu": "400m", "memory": "2G"}


def test_pod_defaulting_request_from_limit():
    """SetDefaults_Pod, before admission: a missing request is the limit, so LimitRanger's defaultRequest no longer
    applies to it."""
    lr = [items(limit_range("Container", default_request=rl("100m")))]
    p = containers(pod(1, None, rl("1")))
    assert mutate(lr, p) == []
    assert as_text(p[0].requests) == {"cpu": "1"}


SUCCESS = [
    ("ctr-min-cpu-request", pod(1, rl("100m")), limit_range("Container", min_=rl("50m"))),
    ("ctr-min-cpu-request-limit", pod(1, rl("100m"), rl("200m")), limit_range("Container", min_=rl("50m"))),
    ("ctr-min-memory-request", pod(1, rl(memory="60Mi")), limit_range("Container", min_=rl(memory="50Mi"))),
    ("ctr-min-memory-request-limit", pod(1, rl(memory="60Mi"), rl(memory="100Mi")),
     limit_range("Container", min_=rl(memory="50Mi"))),
    ("ctr-max-cpu-request-limit", pod(1, rl("500m"), rl("1")), limit_range("Container", max_=rl("2"))),
    ("ctr-max-cpu-limit", pod(1, None, rl("1")), limit_range("Container", max_=rl("2"))),
    ("ctr-max-mem-request-limit", pod(1, rl(memory="250Mi"), rl(memory="500Mi")),
     limit_range("Container", max_=rl(memory="1Gi"))),
    ("ctr-max-cpu-ratio", pod(1, rl("500m"), rl("750m")), limit_range("Container", ratio=rl("1.5"))),
    ("ctr-max-mem-limit", pod(1, None, rl(memory="500Mi")), limit_range("Container", max_=rl(memory="1Gi"))),
    ("pod-min-cpu-request", pod(2, rl("75m")), limit_range("Pod", min_=rl("100m"))),
    ("pod-min-cpu-request-limit", pod(2, rl("75m"), rl("200m")), limit_range("Pod", min_=rl("100m"))),
    ("pod-min-memory-request", pod(2, rl(memory="60Mi")), limit_range("Pod", min_=rl(memory="100Mi"))),
    ("pod-min-memory-request-limit", pod(2, rl(memory="60Mi"), rl(memory="100Mi")),
     limit_range("Pod", min_=rl(memory="100Mi"))),
    ("pod-init-min-memory-request", pod(2, rl(memory="60Mi"), inits=[(rl(memory="100Mi"), None)]),
     limit_range("Pod", min_=rl(memory="100Mi"))),
    ("pod-init-min-memory-request-limit",
     pod(2, rl(memory="60Mi"), rl(memory="100Mi"), inits=[(rl(memory="80Mi"), rl(memory="100Mi"))]),
     limit_range("Pod", min_=rl(memory="100Mi"))),
    ("pod-max-cpu-request-limit", pod(2, rl("500m"), rl("1")), limit_range("Pod", max_=rl("2"))),
    ("pod-max-cpu-limit", pod(2, None, rl("1")), limit_range("Pod", max_=rl("2"))),
    ("pod-init-max-cpu-request-limit", pod(2, rl("500m"), rl("1"), inits=[(rl("1"), rl("2")), (rl("1"), rl("1"))]),
     limit_range("Pod", max_=rl("2"))),
    ("pod-init-max-cpu-limit", pod(2, None, rl("1"), inits=[(None, rl("2")), (None, rl("2"))]),
     limit_range("Pod", max_=rl("2"))),
    ("pod-max-mem-request-limit", pod(2, rl(memory="250Mi"), rl(memory="500Mi")),
     limit_range("Pod", max_=rl(memory="1Gi"))),
    ("pod-max-mem-limit", pod(2, None, rl(memory="500Mi")), limit_range("Pod", max_=rl(memory="1Gi"))),
    ("pod-max-mem-ratio", pod(3, rl(memory="300Mi"), rl(memory="450Mi")),
     limit_range("Pod", max_=rl(memory="2Gi"), ratio=rl(memory="1.5"))),
    ("ctr-1-min-local-ephemeral-storage-request", pod(1, rl(storage="60Mi")),
     limit_range("Container", min_=rl(storage="50Mi"))),
    ("ctr-2-max-local-ephemeral-storage-limit", pod(2, None, rl(storage="500Mi")),
     limit_range("Container", max_=rl(storage="600Mi"))),
    ("pod-max-local-ephemeral-storage-ratio", pod(3, rl(storage="300Mi"), rl(storage="450Mi")),
     limit_range("Pod", max_=rl(storage="2Gi"), ratio=rl(storage="1.5"))),
]

ERRORS = [
    ("ctr-min-cpu-request", pod(1, rl("40m")), limit_range("Container", min_=rl("50m")),
     "minimum cpu usage per Container is 50m, but request is 40m"),
    ("ctr-min-cpu-request-limit", pod(1, rl("40m"), rl("200m")), limit_range("Container", min_=rl("50m")),
     "minimum cpu usage per Container is 50m, but request is 40m"),
    ("ctr-min-memory-request", pod(1, rl(memory="40Mi")), limit_range("Container", min_=rl(memory="50Mi")),
     "minimum memory usage per Container is 50Mi, but request is 40Mi"),
    ("ctr-min-memory-request-limit", pod(1, rl(memory="40Mi"), rl(memory="100Mi")),
     limit_range("Container", min_=rl(memory="50Mi")), "minimum memory usage per Container is 50Mi, but request is 40Mi"),
    ("ctr-max-cpu-request-limit", pod(1, rl("500m"), rl("2500m")), limit_range("Container", max_=rl("2")),
     "maximum cpu usage per Container is 2, but limit is 2500m"),
    ("ctr-max-cpu-limit", pod(1, None, rl("2500m")), limit_range("Container", max_=rl("2")),
     "maximum cpu usage per Container is 2, but limit is 2500m"),
    ("ctr-max-cpu-ratio", pod(1, rl("1250m"), rl("2500m")), limit_range("Container", ratio=rl("1")),
     "cpu max limit to request ratio per Container is 1, but provided ratio is 2.000000"),
    ("ctr-max-mem-request-limit", pod(1, rl(memory="250Mi"), rl(memory="2Gi")),
     limit_range("Container", max_=rl(memory="1Gi")), "maximum memory usage per Container is 1Gi, but limit is 2Gi"),
    ("ctr-max-mem-limit", pod(1, None, rl(memory="2Gi")), limit_range("Container", max_=rl(memory="1Gi")),
     "maximum memory usage per Container is 1Gi, but limit is 2Gi"),
    ("pod-min-cpu-request", pod(1, rl("75m")), limit_range("Pod", min_=rl("100m")),
     "minimum cpu usage per Pod is 100m, but request is 75m"),
    ("pod-min-cpu-request-limit", pod(1, rl("75m"), rl("200m")), limit_range("Pod", min_=rl("100m")),
     "minimum cpu usage per Pod is 100m, but request is 75m"),
    ("pod-min-memory-request", pod(1, rl(memory="60Mi")), limit_range("Pod", min_=rl(memory="100Mi")),
     "minimum memory usage per Pod is 100Mi, but request is 60Mi"),
    ("pod-min-memory-request-limit", pod(1, rl(memory="60Mi"), rl(memory="100Mi")),
     limit_range("Pod", min_=rl(memory="100Mi")), "minimum memory usage per Pod is 100Mi, but request is 60Mi"),
    ("pod-max-cpu-request-limit", pod(3, rl("500m"), rl("1")), limit_range("Pod", max_=rl("2")),
     "maximum cpu usage per Pod is 2, but limit is 3"),
    ("pod-max-cpu-limit", pod(3, None, rl("1")), limit_range("Pod", max_=rl("2")),
     "maximum cpu usage per Pod is 2, but limit is 3"),
    ("pod-max-mem-request-limit", pod(3, rl(memory="250Mi"), rl(memory="500Mi")),
     limit_range("Pod", max_=rl(memory="1Gi")), "maximum memory usage per Pod is 1Gi, but limit is 1500Mi"),
    ("pod-max-mem-limit", pod(3, None, rl(memory="500Mi")), limit_range("Pod", max_=rl(memory="1Gi")),
     "maximum memory usage per Pod is 1Gi, but limit is 1500Mi"),
    ("pod-init-max-mem-limit", pod(1, None, rl(memory="500Mi"), inits=[(None, rl(memory="1.5Gi"))]),
     limit_range("Pod", max_=rl(memory="1Gi")), "maximum memory usage per Pod is 1Gi, but limit is 1536Mi"),
    ("pod-max-mem-ratio", pod(3, rl(memory="250Mi"), rl(memory="500Mi")),
     limit_range("Pod", max_=rl(memory="2Gi"), ratio=rl(memory="1.5")),
     "memory max limit to request ratio per Pod is 1500m, but provided ratio is 2.000000"),
    ("ctr-1-min-local-ephemeral-storage-request", pod(1, rl(storage="40Mi")),
     limit_range("Container", min_=rl(storage="50Mi")),
     "minimum ephemeral-storage usage per Container is 50Mi, but request is 40Mi"),
]


@pytest.mark.parametrize("name,spec,lr", SUCCESS, ids=[c[0] for c in SUCCESS])
def test_pod_limit_func_success(name, spec, lr):
    assert admit([lr], spec).refused_by is None


@pytest.mark.parametrize("name,spec,lr,message", ERRORS, ids=[c[0] for c in ERRORS])
def test_pod_limit_func_error(name, spec, lr, message):
    found = admit([lr], spec)
    assert found.refused_by == 0
    assert found.findings == [message]


def test_min_without_request_is_defaulted_by_the_limit_range_itself():
    """admission_test.go's ctr-min-cpu-no-request-limit is refused in upstream's unit test, which skips the object's
    defaulting; the API server defaults the stored LimitRange's defaultRequest from min first, so the pod passes."""
    assert admit([limit_range("Container", min_=rl("50m"))], pod(1)).refused_by is None
    # max without a limit is defaulted the same way (default from max)
    assert admit([limit_range("Container", max_=rl("2"))], pod(1)).refused_by is None
    # ratio without defaults: nothing to default from, refused with upstream's words
    found = admit([limit_range("Container", ratio=rl("2"))], pod(1))
    assert found.findings == ["cpu max limit to request ratio per Container is 2, but no request is specified or "
                              "request is 0"]


def test_several_findings_aggregate_deduplicated_and_first_range_refuses():
    from policies.kube.limit_range import aggregate
    found = admit([limit_range("Container", max_=rl("1")), limit_range("Container", max_=rl("100m"))],
                  pod(2, None, rl("2")))
    assert found.refused_by == 0
    assert aggregate(found.findings) == "maximum cpu usage per Container is 1, but limit is 2"
    found = admit([limit_range("Container", max_=rl("1", "1Gi"))], pod(1, None, rl("2", "2Gi")))
    assert aggregate(found.findings) == ("[maximum cpu usage per Container is 1, but limit is 2, maximum memory usage "
                                         "per Container is 1Gi, but limit is 2Gi]")


def test_sidecars_count_in_pod_sums():
    """podLimits: a restartable init container (a sidecar) runs beside the containers and adds to their sum."""
    spec = pod(1, None, rl("1"))
    spec["initContainers"] = [{"name": "proxy", "restartPolicy": "Always", "resources": {"limits": rl("1500m")}}]
    assert admit([limit_range("Pod", max_=rl("2"))], spec).findings == [
        "maximum cpu usage per Pod is 2, but limit is 2500m"]


@pytest.mark.parametrize("written,said", [
    ("1.5", "1500m"), ("2000m", "2"), ("100m", "100m"), ("2", "2"), ("0.5Gi", "512Mi"), ("2048Mi", "2Gi"),
    ("1.5Gi", "1536Mi"), ("500Mi", "500Mi"), ("1000", "1k"), ("1500", "1500"), ("1e3", "1e3"), ("0", "0"),
    ("1G", "1G"), ("512", "512"), (2, "2"), ("1Ki", "1Ki"), ("0.1", "100m"), ("1n", "1n")])
def test_quantity_string(written, said):
    q = parse_quantity(written)
    assert q is not None and canonical(q) == said


@pytest.mark.parametrize("item,expected", [
    ({"type": "Container", "min": {"cpu": "500m"}, "default": {"cpu": "250m"}},
     [("spec.limits[0].defaultRequest.cpu", "min value 500m is greater than default request value 250m"),
      ("spec.limits[0].default.cpu", "min value 500m is greater than default value 250m")]),
    ({"type": "Container", "min": {"memory": "2Gi"}, "max": {"memory": "1Gi"}},
     [("spec.limits[0].min.memory", "min value 2Gi is greater than max value 1Gi"),
      ("spec.limits[0].defaultRequest.memory", "min value 2Gi is greater than default request value 1Gi"),
      ("spec.limits[0].default.memory", "min value 2Gi is greater than default value 1Gi")]),
    ({"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}},
     [("spec.limits[0].maxLimitRequestRatio.cpu", "ratio 500m is less than 1")]),
    ({"type": "Pod", "min": {"cpu": "1"}, "max": {"cpu": "2"}, "maxLimitRequestRatio": {"cpu": "3"}},
     [("spec.limits[0].maxLimitRequestRatio.cpu", "ratio 3 is greater than max/min = 2.000000")]),
    ({"type": "Container", "default": {"nvidia.com/gpu": "2"}, "defaultRequest": {"nvidia.com/gpu": "1"}},
     [("spec.limits[0].defaultRequest.nvidia.com/gpu", "default value 2 must equal to defaultRequest value 1 in "
       "nvidia.com/gpu")]),
    ({"type": "Pod", "default": {"cpu": "1"}},
     [("spec.limits[0].default", "Forbidden: may not be specified when `type` is 'Pod'")]),
    ({"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "2"}, "default": {"cpu": "1"}}, []),
    ({"type": "Container", "default": {"nvidia.com/gpu": "1"}}, []),
])
def test_validate_limit_range(item, expected):
    """ValidateLimitRange on the defaulted object (the `max`-defaulted default of the second case included)."""
    from policies.kube.limit_range import refusals
    assert refusals({"spec": {"limits": [item]}}) == expected
