"""SEC010: the pods a controller creates meet the Pod Security level their namespace enforces
(k8s.io/pod-security-admission v0.36.0; the checks themselves are tested case by case in test_pod_security.py and on
upstream's fixtures in test_pod_security_fixtures.py). Here: where the level comes from (the Namespace's labels, an
Argo CD Application's managed namespace labels, the environment's declared cluster defaults, exemptions), what an error
is and what only a warning under a condition, and real inputs: Kubeflow's own platform pods in the namespaces it
labels restricted, and this repository's own overlays."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from policies.argocd import apps as argocd
from policies.kube.objects import ERROR, WARNING
from policies.kube.pod_security_admission import config
from policies.report import engine
from policies.render.files import read
from policies.render.render import render
from policies.rules import environment

from conftest import FIXTURES, REPO, copy_repository, run_cli

POD = """apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: {ns}
spec:
  automountServiceAccountToken: false
  {extra}
  securityContext: {{runAsNonRoot: true, runAsUser: 1000, seccompProfile: {{type: RuntimeDefault}}}}
  containers:
    - name: trainer
      image: ghcr.io/example/ddp-trainer:0.1.0
      securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}}}
"""


def namespace(name: str, **labels: str) -> str:
    lines = "".join(f"\n    pod-security.kubernetes.io/{k.replace('_', '-')}: {v}" for k, v in labels.items())
    return f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:{lines or ' {}'}\n---\n"


def sec010(tmp_path: Path, text: str, policy: str | None = None) -> list:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    unit = engine.Unit(str(path), "file", read(str(path)))
    if policy is not None:
        (tmp_path / "policy.yaml").write_text(policy)
        unit.environment, errors = environment.load(tmp_path / "policy.yaml")
        assert not errors, [e.message for e in errors]
    engine.check_policies(unit)
    return [p for p in unit.problems if p.rule == "SEC010"]


def policy(pod_security: str) -> str:
    return ("apiVersion: policies.ddp/v1\nkind: Environment\nmetadata:\n  name: t\nspec:\n"
            f"  podSecurity: {pod_security}\n")


def test_kubeflows_own_platform_pods_meet_the_restricted_level_its_namespaces_enforce(tmp_path):
    """kubeflow/manifests labels its platform's namespaces enforce: restricted and runs 35 controllers there: silent.
    Every one of them is read: without its containers' securityContext each is refused. One container's
    allowPrivilegeEscalation gone: that Deployment alone is refused, as the API server would."""
    text = (FIXTURES / "pod-security/kubeflow-platform-restricted.yaml").read_text()
    assert sec010(tmp_path, text) == []
    docs = [d for d in yaml.safe_load_all(text) if d]
    restricted = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace" and
                  d["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") == "restricted"}
    assert len(restricted) == 7
    bare = yaml.safe_load_all(text)
    pods = [d for d in bare if d and d["kind"] != "Namespace" and d["metadata"].get("namespace") in restricted]
    for d in pods:
        for c in d["spec"]["template"]["spec"]["containers"]:
            c.pop("securityContext", None)
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    found = sec010(tmp_path, yaml.safe_dump_all(namespaces + pods))
    assert len(pods) >= 30 and sorted(p.obj for p in found) == sorted(
        f"{d['kind']}/{d['metadata']['namespace']}/{d['metadata']['name']}" for d in pods)
    operator = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "training-operator")
    del operator["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
    found = sec010(tmp_path, yaml.safe_dump_all(docs))
    assert [(p.severity, p.obj, p.field) for p in found] == [
        (ERROR, "Deployment/kubeflow/training-operator", "spec.template.spec")]
    assert ('violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container '
            '"training-operator" must set securityContext.allowPrivilegeEscalation=false)') in found[0].message
    assert "(pod-security.kubernetes.io/enforce: restricted)" in found[0].message


def _overlay_in(ns: str, overlay: str) -> str:
    """The kind-cpu overlay as rendered, every namespaced object placed in namespace `ns`."""
    unit = engine.collect([str(REPO / "overlays/kind-cpu" / overlay)], REPO / "overlays")[0]
    docs = []
    for m in unit.manifests:
        obj = yaml.safe_load(yaml.safe_dump(m.obj))
        if m.kind not in ("ClusterTrainingRuntime",):
            obj["metadata"]["namespace"] = ns
        docs.append(obj)
    return yaml.safe_dump_all(docs)


@pytest.mark.parametrize("overlay", sorted(p.name for p in (REPO / "overlays/kind-cpu").iterdir()
                                           if (p / "kustomization.yaml").is_file()))
def test_the_repositorys_pods_meet_restricted_but_the_training_operators_init_container(overlay, tmp_path):
    """Every kind-cpu overlay's pods meet `restricted`, as its templates are written to. A PyTorchJob with a
    Master and Workers gets the training operator's init-pytorch on each worker, with no securityContext
    (initcontainer.go at v1.9.4): a warning under that condition, since the operator's installation may template it
    otherwise; at baseline it is admitted."""
    text = _overlay_in("train", overlay)
    found = sec010(tmp_path, namespace("train", enforce="restricted") + text)
    if overlay == "pytorchjob":
        assert [(p.severity, p.field) for p in found] == [(WARNING, "spec.pytorchReplicaSpecs.Worker.template.spec")]
        assert 'container "init-pytorch" must set securityContext.allowPrivilegeEscalation=false' in found[0].message
        assert "in init-pytorch, which the PyTorchJob controller adds as its installation does by default" in \
            found[0].message
        assert "init-container template" in found[0].hint
    else:
        assert found == [], [p.line() for p in found]
    assert sec010(tmp_path, namespace("train", enforce="baseline", warn="baseline") + text) == []


def test_the_level_comes_from_the_namespace_over_the_declared_cluster_default(tmp_path):
    declared = policy("{defaults: {enforce: baseline}}")
    host = POD.format(ns="train", extra="hostIPC: true")
    # a Namespace in the manifests without a label: the cluster's declared default, shown: an error
    found = sec010(tmp_path, namespace("train") + host, declared)
    assert [p.severity for p in found] == [ERROR]
    assert "namespace 'train' (no pod-security.kubernetes.io/enforce label: the cluster's default)" in found[0].message
    assert 'violates PodSecurity "baseline:latest": host namespaces (hostIPC=true)' in found[0].message
    # its own label over the default
    assert sec010(tmp_path, namespace("train", enforce="privileged") + host, declared) == []
    # no declaration: upstream's default is privileged, nothing refused
    assert sec010(tmp_path, namespace("train") + host) == []
    # a namespace not in the manifests: the default, unless its labels (not shown) say otherwise: a warning
    found = sec010(tmp_path, host, declared)
    assert [p.severity for p in found] == [WARNING]
    assert "namespace 'train' (not in these manifests: the cluster's default)" in found[0].message
    assert found[0].message.endswith("(unless that namespace's labels set another level)")
    # no namespace at all: wherever it is applied
    found = sec010(tmp_path, POD.format(ns="''", extra="hostIPC: true"), declared)
    assert [p.severity for p in found] == [WARNING]
    assert "the namespace they are applied to (none set: the cluster's default)" in found[0].message


def test_exemptions_as_the_admission_plugin_reads_them(tmp_path):
    host = POD.format(ns="train", extra="hostPID: true")
    labelled = namespace("train", enforce="baseline")
    assert sec010(tmp_path, labelled + host, policy("{exemptions: {namespaces: [train]}}")) == []
    assert sec010(tmp_path, labelled + host.replace("hostPID: true", "hostPID: true\n  runtimeClassName: kata"),
                  policy("{exemptions: {runtimeClasses: [kata]}}")) == []
    # the pods' creator is not in the manifests: an exempt username makes the refusal a condition
    found = sec010(tmp_path, labelled + host, policy("{exemptions: {usernames: ['system:serviceaccount:argocd:x']}}"))
    assert [p.severity for p in found] == [WARNING]
    assert "unless whoever applies it creates them as one of the cluster's exempt usernames" in found[0].message


def test_a_refused_pod_gets_no_warning_and_an_admitted_one_the_warn_levels(tmp_path):
    """EvaluatePod (admission.go 508-524): warnings only on a request it admits."""
    no_drop = POD.format(ns="train", extra="hostIPC: true").replace(", capabilities: {drop: [ALL]}", "")
    found = sec010(tmp_path, namespace("train", enforce="baseline", warn="restricted") + no_drop)
    assert [p.severity for p in found] == [ERROR] and "refuses" in found[0].message
    found = sec010(tmp_path, namespace("train", enforce="baseline", warn="restricted") +
                   no_drop.replace("  hostIPC: true\n", ""))
    assert [p.severity for p in found] == [WARNING]
    assert 'the API server warns on these pods in namespace \'train\' (pod-security.kubernetes.io/warn: restricted): ' \
           'would violate PodSecurity "restricted:latest": unrestricted capabilities' in found[0].message
    # audit only records
    assert sec010(tmp_path, namespace("train", audit="restricted") + no_drop.replace("  hostIPC: true\n", "")) == []


@pytest.mark.parametrize("labels, says", [
    ({"enforce": "strict"}, 'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be '
                            "one of privileged, baseline, restricted"),
    ({"warn_version": "'1.30'"}, 'metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: '
                                 '"1.30": must be "latest" or "v1.x"'),
])
def test_a_namespace_with_an_invalid_label_is_refused(labels, says, tmp_path):
    found = sec010(tmp_path, namespace("train", **labels).rstrip("-\n"))
    assert [(p.severity, p.obj, p.field) for p in found] == [(ERROR, "Namespace/train", "metadata.labels")]
    assert found[0].message == f"the API server refuses the Namespace: {says}"


def test_an_invalid_enforce_label_holds_the_pods_to_restricted(tmp_path):
    """api.PolicyToEvaluate fails closed for enforce: an unparsable level is restricted (helpers.go)."""
    found = sec010(tmp_path, namespace("train", enforce="strict") +
                   POD.format(ns="train", extra="").replace(", capabilities: {drop: [ALL]}", ""))
    assert [p.obj for p in found] == ["Namespace/train", "Pod/train/trainer"]
    assert 'violates PodSecurity "restricted:latest"' in found[1].message


@pytest.mark.parametrize("value, says", [
    ("{defaults: {enforce: strict}}", "spec.podSecurity.defaults.enforce: Invalid value: 'strict': must be one of "
                                      "privileged, baseline, restricted"),
    ("{defaults: {warn-version: '1.30'}}", "spec.podSecurity.defaults.warn-version: Invalid value: '1.30': must be "
                                           '"latest" or "v1.x"'),
    ("{defaults: {enforce_version: latest}}", "spec.podSecurity.defaults.enforce_version is not a PodSecurityDefaults "
                                              "field"),
    ("{exemptions: {namespaces: [Train]}}", "spec.podSecurity.exemptions.namespaces[0]: Invalid value: 'Train': a "
                                            "namespace name is a DNS-1123 label"),
    ("{exemptions: {runtimeClasses: [kata, kata]}}", "spec.podSecurity.exemptions.runtimeClasses[1]: Duplicate "
                                                     "value: 'kata'"),
    ("{exemptions: {usernames: ['']}}", "spec.podSecurity.exemptions.usernames[0]: Invalid value: '': must be "
                                        "non-empty"),
    ("{exemption: {}}", "spec.podSecurity.exemption is not a field of a PodSecurityConfiguration"),
    ("[baseline]", "spec.podSecurity is ['baseline'], expected a dict"),
])
def test_a_declaration_the_api_server_would_refuse_is_an_env_error_on_its_line(value, says, tmp_path):
    (tmp_path / "policy.yaml").write_text(policy(value))
    env, problems = environment.load(tmp_path / "policy.yaml")
    assert env is None and problems
    assert says in problems[0].message and problems[0].location[1] == 6, [p.message for p in problems]
    assert all("\n" not in p.line() for p in problems)


def test_a_declaration_is_defaulted_as_upstream_defaults_it():
    cfg, errors = config({"defaults": {"enforce": "baseline", "warn": "restricted", "warn-version": "v1.30"}})
    assert errors == [] and cfg is not None
    assert (str(cfg.defaults.enforce), str(cfg.defaults.audit), str(cfg.defaults.warn)) == (
        "baseline:latest", "privileged:latest", "restricted:v1.30")


def test_the_operators_declaration_is_the_clusters(tmp_path):
    """Under the Argo CD plugin the operator's policy runs the cluster: its podSecurity, where it declares one."""
    (tmp_path / "own.yaml").write_text(policy("{defaults: {enforce: privileged}}"))
    (tmp_path / "op.yaml").write_text(policy("{defaults: {enforce: restricted}}"))
    own, _ = environment.load(tmp_path / "own.yaml")
    operator, _ = environment.load(tmp_path / "op.yaml")
    assert own is not None and operator is not None
    assert environment.tightened(own, operator).pod_security == operator.pod_security
    operator.pod_security = None
    assert environment.tightened(own, operator).pod_security == own.pod_security
    assert environment.describe(own)["podSecurity"]["defaults"]["enforce"] == "privileged"


def test_malformed_namespaces_and_pods_are_read_without_a_traceback(tmp_path):
    text = ("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: train\n  labels: {pod-security.kubernetes.io/enforce:"
            " 3}\n---\n" + POD.format(ns="train", extra="volumes: 7\n  hostNetwork: 'yes'"))
    found = sec010(tmp_path, text)
    assert found and all("\n" not in p.line() for p in found)


def test_the_argo_cd_plugins_operator_policy_declares_the_clusters_level(tmp_path):
    """`validate --operator-policy` (as the plugin checks): an operator whose cluster enforces restricted by default
    gets the kind-cpu PyTorchJob's worker pods flagged, where the manifests name no namespace, as a warning under both
    conditions; the StatefulSet's pods meet it."""
    op = tmp_path / "operator.yaml"
    op.write_text(policy("{defaults: {enforce: restricted}}"))
    proc = run_cli("validate", "--format", "json", "--operator-policy", str(op), "overlays/kind-cpu/pytorchjob",
                   "overlays/kind-cpu/statefulset")
    found = [p for p in json.loads(proc.stdout)["problems"] if p["rule"] == "SEC010"]
    assert [(p["severity"], p["source"]) for p in found] == [(WARNING, "overlays/kind-cpu/pytorchjob")], proc.stdout
    assert "the namespace they are applied to (none set: the cluster's default)" in found[0]["message"]
    assert "unless that namespace's labels set another level; in init-pytorch" in found[0]["message"]


def _repository_copy(root: Path, labels: str) -> Path:
    """The repository's overlays and argocd/ in `root`, its ApplicationSet's syncPolicy given
    managedNamespaceMetadata with these labels (it already has CreateNamespace=true)."""
    copy_repository(root)
    appset = root / "argocd/applicationset.yaml"
    text = appset.read_text()
    assert "\n      syncPolicy:\n" in text and "- CreateNamespace=true" in text
    appset.write_text(text.replace("\n      syncPolicy:\n", "\n      syncPolicy:\n        managedNamespaceMetadata:\n"
                                   f"          labels: {labels}\n", 1))
    return root


def _pytorchjob_application(root: Path) -> tuple[str, str]:
    """(overlay, destination namespace) of the Application of root's argocd/ that syncs a PyTorchJob overlay (the
    repository's ApplicationSet says which launcher each environment runs; a fork's `make init` names its own)."""
    rendered = render(root / "argocd")
    assert rendered.error is None, rendered.error
    for app in argocd.applications(rendered.manifests)[0]:
        for _, source in app.sources:
            path = str(source.get("path") or "").strip("/")
            if path.endswith("/pytorchjob") and app.destination.get("namespace"):
                return path, str(app.destination["namespace"])
    pytest.skip("no Application of argocd/ syncs a PyTorchJob overlay")


@pytest.mark.parametrize("with_argocd", [False, True], ids=["overlay alone", "with argocd"])
def test_the_level_an_argo_cd_application_sets_on_its_destination_namespace(tmp_path, with_argocd):
    """An overlay's objects name no namespace: they go to the Application's destination, whose labels Argo CD sets
    from managedNamespaceMetadata at every sync with CreateNamespace=true (argo-cd v3.5.1 controller/sync.go 337-338,
    sync_namespace.go 14-46): that level is shown, so only the init container's condition remains; the same whether
    argocd/ is validated in the same run or not."""
    root = _repository_copy(tmp_path / "repo", "{pod-security.kubernetes.io/enforce: restricted}")
    overlay, namespace = _pytorchjob_application(root)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    paths = [overlay, "argocd"] if with_argocd else [overlay]
    proc = subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--format", "json", *paths], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)
    found = [p for p in json.loads(proc.stdout)["problems"] if p["rule"] == "SEC010"]
    assert [(p["severity"], p["source"]) for p in found] == [(WARNING, overlay)], proc.stdout[-3000:]
    message = found[0]["message"]
    assert f"namespace '{namespace}' (pod-security.kubernetes.io/enforce: restricted, set by Application " in message
    assert "'s managedNamespaceMetadata)" in message and "unless that namespace's labels" not in message
    assert message.endswith("(in init-pytorch, which the PyTorchJob controller adds as its installation does by "
                            "default)")
    assert not [p for p in json.loads(proc.stdout)["problems"] if p["rule"] == "ARGO008" and p["severity"] == ERROR]



def _plan(*paths: Path) -> list[dict]:
    proc = run_cli("plan", "--format", "json", *map(str, paths))
    assert proc.returncode in (0, 1), proc.stderr
    return [w for u in json.loads(proc.stdout)["overlays"] for w in u["workloads"]]


def test_make_plan_says_which_pods_the_api_server_refuses(tmp_path):
    """A refusal the input shows: make plan says those pods are not created (JSON `pods_refused`, `pods_now` without
    them, a text note). A PyTorchJob whose Worker template alone is refused still gets its Master. A refusal under a
    condition (a container the controller adds) is a warning: the plan claims none."""
    refused = FIXTURES / "rules/SEC010/fail/statefulset-restricted-no-seccomp.yaml"
    (sts,) = _plan(refused)
    assert sts["pod_count"] == 2 and sts["pods_now"] == 0
    assert [(r["object"], r["field"]) for r in sts["pods_refused"]] == [("StatefulSet/train/ddp-train-run-001",
                                                                         "spec.template.spec")]
    assert sts["pods_refused"][0]["why"].startswith("the API server refuses these pods in namespace 'train'")
    text = run_cli("plan", str(refused)).stdout
    assert ("note: StatefulSet/ddp-train-run-001: the pods of StatefulSet/train/ddp-train-run-001 spec.template.spec "
            "are not created: the API server refuses these pods in namespace 'train'") in text

    docs = list(yaml.safe_load_all((FIXTURES / "rules/SEC010/pass/pytorchjob-baseline.yaml").read_text()))
    job = next(d for d in docs if d["kind"] == "PyTorchJob")
    (pj,) = _plan(FIXTURES / "rules/SEC010/pass/pytorchjob-baseline.yaml")
    assert pj["pods_now"] == 2 and "pods_refused" not in pj
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["hostNetwork"] = True
    (tmp_path / "worker-host-network.yaml").write_text(yaml.safe_dump_all(docs))
    (pj,) = _plan(tmp_path / "worker-host-network.yaml")
    assert [r["field"] for r in pj["pods_refused"]] == ["spec.pytorchReplicaSpecs.Worker.template.spec"]
    assert pj["pod_count"] == 2 and pj["pods_now"] == 1  # the Master's pod is admitted

    (conditional,) = _plan(FIXTURES / "rules/SEC010/fail/pytorchjob-operator-init-container.yaml")
    assert conditional["pods_now"] == 2 and "pods_refused" not in conditional
