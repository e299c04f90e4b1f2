"""RES008 (LimitRanger) and RES009 (ResourceQuota) as rules: what is an error (the input shows the namespace), what is
a warning phrased as its condition, and what `make plan` is told (pods_refused)."""
from __future__ import annotations

from pathlib import Path

import pytest

from policies.argocd import identity
from policies.kube.objects import ERROR, WARNING
from policies.render import gitops

from conftest import FIXTURES
from test_rules import problems_of

RES008 = FIXTURES / "rules" / "RES008"
RES009 = FIXTURES / "rules" / "RES009"


@pytest.fixture(autouse=True)
def template_identity():
    with gitops.repository_url(identity.EXAMPLE_REPO_URL):
        yield


def found(path, rule):
    return [p for p in problems_of(path) if p.rule == rule]


def test_a_refusal_the_input_shows_is_an_error_and_plan_hears_of_it():
    (p,) = found(RES008 / "fail/container-max-cpu.yaml", "RES008")
    assert p.severity == ERROR and p.extra.get("pods_refused")
    assert p.message.endswith("LimitRange 'limits': maximum cpu usage per Container is 1, but limit is 2")


def test_what_the_defaults_set_is_named():
    (p,) = found(RES008 / "fail/ratio-defaulted-request.yaml", "RES008")
    assert p.severity == ERROR
    assert "provided ratio is 4.000000 (LimitRanger plugin set: memory request for container sidecar; memory limit " \
           "for container sidecar)" in p.message


@pytest.mark.parametrize("path,condition", [
    (RES008 / "fail/namespace-unknown.yaml", "if these pods are applied to namespace 'train', as they name none"),
    (RES008 / "fail/pytorchjob-operator-init-container.yaml",
     "in init-pytorch, which the PyTorchJob controller adds as its installation does by default"),
])
def test_what_the_input_does_not_show_is_a_warning_with_its_condition(path, condition):
    (p,) = found(path, "RES008")
    assert p.severity == WARNING and condition in p.message and not p.extra.get("pods_refused")


def test_a_limit_range_without_a_namespace_beside_pods_with_one(tmp_path):
    text = (RES008 / "fail/container-max-cpu.yaml").read_text().replace("  namespace: train\nspec:\n  limits:",
                                                                        "spec:\n  limits:", 1)
    (tmp_path / "x.yaml").write_text(text)
    (p,) = found(tmp_path / "x.yaml", "RES008")
    assert p.severity == WARNING
    assert "if the LimitRange is applied to namespace 'train', as it names none" in p.message


def test_a_refused_limit_range_holds_no_pod(tmp_path):
    text = (RES008 / "fail/container-max-cpu.yaml").read_text().replace("    max:\n      cpu: '1'\n",
                                                                        "    max:\n      cpu: '1'\n    min:\n      cpu: '2'\n", 1)
    (tmp_path / "x.yaml").write_text(text)
    problems = found(tmp_path / "x.yaml", "RES008")
    assert [p.obj for p in problems] == ["LimitRange/train/limits"] * len(problems)
    assert any("min value 2 is greater than max value 1" in p.message for p in problems)


def test_quota_errors_and_warnings():
    (p,) = found(RES009 / "fail/must-specify-limits-cpu.yaml", "RES009")
    assert p.severity == ERROR and p.message.endswith("failed quota: compute: must specify limits.cpu for: sidecar")
    (p,) = found(RES009 / "fail/world-over-gpu-quota.yaml", "RES009")
    assert p.severity == ERROR and "the world's 4 pods must all run at once" in p.message
    (p,) = found(RES009 / "fail/pods-count.yaml", "RES009")
    assert p.severity == WARNING and p.obj == "ResourceQuota/train/pods" and "pods=3" in p.message


def test_a_world_that_fits_alone_is_only_a_warning_beside_another(tmp_path):
    """Two 4-GPU worlds under a quota of 4: each fits alone, so they may run one after the other."""
    text = (RES009 / "pass/world-within-gpu-quota.yaml").read_text()
    second = text.split("---\n", 1)[1].replace("name: ddp-train\n", "name: ddp-train-b\n")
    (tmp_path / "x.yaml").write_text(text + "---\n" + second)
    (p,) = found(tmp_path / "x.yaml", "RES009")
    assert p.severity == WARNING and "requests.nvidia.com/gpu=8" in p.message
