"""ADM003: Kueue's webhooks on its admin objects, the upstream test tables ported (kueue v0.19.2 pkg/webhooks,
file:line of each case). Upstream compares field.Error type and path (ignoring the value or the detail): so do these,
as `path: Type`."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from policies.launchers.kueue_webhooks import cohort, cluster_queue, refusals, resource_flavor

from test_rules import problems_of

RG = "spec.resourceGroups"


def _fq(name, *resources):
    """MakeFlavorQuotas(name).Resource(res, nominal, borrowing, lending)..."""
    out = []
    for r in resources:
        r = (r,) if isinstance(r, str) else r
        q = {"name": r[0], "nominalQuota": r[1] if len(r) > 1 else "0"}
        if len(r) > 2 and r[2] != "":
            q["borrowingLimit"] = r[2]
        if len(r) > 3 and r[3] != "":
            q["lendingLimit"] = r[3]
        out.append(q)
    return {"name": name, "resources": out}


def _rg(*flavors):
    """ResourceGroup(flavors...): coveredResources from the first flavor, as the wrapper does."""
    return {"coveredResources": [r["name"] for r in flavors[0]["resources"]], "flavors": list(flavors)}


def _cq(*groups, **spec):
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster-queue"},
            "spec": {**({"resourceGroups": list(groups)} if groups else {}), **spec}}


def _said(errors):
    """`path: Type` of each refusal, as upstream's tables compare them."""
    return [re.match(r"^(\S+): (Invalid value|Duplicate value|Required value|Forbidden|Unsupported value)", e)
            .group(1, 2) for e in errors]


def _p(path, kind="Invalid value"):
    return (path, kind)


F0 = f"{RG}[0].flavors[0].resources[0]"
CQ_CASES = [  # clusterqueue_webhook_test.go TestValidateClusterQueue
    ("48 built-in resources with qualified names", _cq(_rg(_fq("default", "cpu"))), []),
    ("54 invalid resource name", _cq(_rg(_fq("default", "@cpu"))), [_p(f"{RG}[0].coveredResources[0]")]),
    ("63 admissionChecks defined", _cq(admissionChecks=["ac1", "ac2"]), []),
    ("69 admissionCheckStrategy with a valid flavor", _cq(_rg(_fq("flavor1", "cpu")), admissionChecksStrategy={
        "admissionChecks": [{"name": "ac1", "onFlavors": ["flavor1"]}]}), []),
    ("77 admissionCheckStrategy refers to a flavor that is not in quota", _cq(admissionChecksStrategy={
        "admissionChecks": [{"name": "ac1", "onFlavors": ["flavor1"]}]}),
     [_p("spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]", "Unsupported value")]),
    ("88 in cohort", _cq(cohortName="prod"), []),
    ("92 extended resources with qualified names", _cq(_rg(_fq("default", "example.com/gpu"))), []),
    ("98 flavor with qualified names", _cq(_rg(_fq("default.flavor", "cpu"))), []),
    ("104 flavor quota with negative value", _cq(_rg(_fq("x86", ("cpu", "-1")))), [_p(f"{F0}.nominalQuota")]),
    ("114 flavor quota with zero value", _cq(_rg(_fq("x86", ("cpu", "0")))), []),
    ("121 flavor quota with borrowingLimit 0", _cq(_rg(_fq("x86", ("cpu", "1", "0"))), cohortName="cohort"), []),
    ("129 flavor quota with negative borrowingLimit", _cq(_rg(_fq("x86", ("cpu", "1", "-1"))), cohortName="cohort"),
     [_p(f"{F0}.borrowingLimit")]),
    ("140 flavor quota with lendingLimit 0", _cq(_rg(_fq("x86", ("cpu", "1", "", "0"))), cohortName="cohort"), []),
    ("148 flavor quota with negative lendingLimit", _cq(_rg(_fq("x86", ("cpu", "1", "", "-1"))), cohortName="cohort"),
     [_p(f"{F0}.lendingLimit")]),
    ("159 flavor quota with lendingLimit and empty cohort", _cq(_rg(_fq("x86", ("cpu", "1", "", "1")))),
     [_p(f"{F0}.lendingLimit")]),
    ("169 flavor quota with lendingLimit greater than nominalQuota",
     _cq(_rg(_fq("x86", ("cpu", "1", "", "2"))), cohortName="cohort"), [_p(f"{F0}.lendingLimit")]),
    ("180 empty queueing strategy is supported", _cq(), []),
    ("186 namespaceSelector with invalid labels", _cq(namespaceSelector={"matchLabels": {"nospecialchars^=@": "bar"}}),
     [_p("spec.namespaceSelector.matchLabels")]),
    ("196 namespaceSelector with invalid expressions", _cq(namespaceSelector={
        "matchExpressions": [{"key": "key", "operator": "In"}]}),
     [_p("spec.namespaceSelector.matchExpressions[0].values", "Required value")]),
    ("210 multiple resource groups", _cq(_rg(_fq("alpha", "cpu", "memory"), _fq("beta", "cpu", "memory")),
                                         _rg(_fq("gamma", "example.com/gpu"), _fq("omega", "example.com/gpu"))), []),
    ("233 resources in a flavor in different order",
     _cq({"coveredResources": ["cpu", "memory"], "flavors": [_fq("alpha", "cpu", "memory"),
                                                            _fq("beta", "memory", "cpu")]}),
     [_p(f"{RG}[0].flavors[1].resources[0].name"), _p(f"{RG}[0].flavors[1].resources[1].name")]),
    ("262 resource in more than one resource group",
     _cq(_rg(_fq("alpha", "cpu", "memory")), _rg(_fq("beta", "memory"))),
     [_p(f"{RG}[1].coveredResources[0]", "Duplicate value")]),
    ("281 flavor in more than one resource group", _cq(_rg(_fq("alpha", "cpu"), _fq("beta", "cpu")),
                                                       _rg(_fq("beta", "memory"))),
     [_p(f"{RG}[1].flavors[0].name", "Duplicate value")]),
    ("296 valid preemption with borrowWithinCohort", _cq(preemption={
        "reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}}), []),
]


@pytest.mark.parametrize("name,cq,want", CQ_CASES, ids=[c[0] for c in CQ_CASES])
def test_validate_cluster_queue(name, cq, want):
    assert _said(cluster_queue(cq)) == want


def _flavors(n):
    return [_fq(f"f{i}", "cpu") for i in range(n)]


@pytest.mark.parametrize("groups,want", [  # TestValidateTotalFlavors 698-742: 256 allowed, 257 refused
    ([{"coveredResources": ["cpu"], "flavors": _flavors(128)}, {"coveredResources": ["memory"], "flavors":
      [_fq(f"g{i}", "memory") for i in range(128)]}], []),
    ([{"coveredResources": ["cpu"], "flavors": _flavors(129)}, {"coveredResources": ["memory"], "flavors":
      [_fq(f"g{i}", "memory") for i in range(128)]}], [_p(RG)]),
])
def test_total_flavors(groups, want):
    errors = [e for e in cluster_queue(_cq(*groups)) if "total number of flavors" in e]
    assert _said(errors) == want
    if want:
        assert errors[0].endswith("must be ≤ 256, got 257")


@pytest.mark.parametrize("n,want", [(256, []), (257, [_p(RG)])])  # TestValidateTotalCoveredResources 744-795
def test_total_covered_resources(n, want):
    groups = [{"coveredResources": [f"r{g}-{i}" for i in range(64 if g < 4 else n - 256)], "flavors": []}
              for g in range(4 if n == 256 else 5)]
    errors = [e for e in cluster_queue(_cq(*groups)) if "covered resources" in e]
    assert _said(errors) == want


@pytest.mark.parametrize("n,want", [(512, []), (513, [_p(f"{RG}[0]")])])  # TestValidateFlavorResourceCombinations
def test_flavor_resource_combinations(n, want):  # 797-: 512 pairs in a group allowed, 513 refused
    covered = [f"r{i}" for i in range(64)]
    flavors = [{"name": f"f{j}", "resources": [{"name": r, "nominalQuota": "1"} for r in covered]} for j in range(8)]
    if n > 512:
        flavors.append({"name": "f8", "resources": [{"name": "r0", "nominalQuota": "1"}]})
    errors = [e for e in cluster_queue(_cq({"coveredResources": covered, "flavors": flavors}))
              if "flavor-resource combinations" in e]
    assert _said(errors) == want


def test_cohort_lending_limit_without_parent():  # cohort_webhook_test.go 40-48
    obj = {"kind": "Cohort", "spec": {"resourceGroups": [_rg(_fq("x86", ("cpu", "1", "", "1")))]}}
    assert cohort(obj) == [f'{F0}.lendingLimit: Invalid value: "1": must be nil when parent is empty']
    obj["spec"]["parentName"] = "root"
    assert cohort(obj) == []  # with a parent, and no bound on the lendingLimit (enforceNominalGreaterThanLending)


@pytest.mark.parametrize("spec,want", [  # resourceflavor_webhook_test.go TestValidateResourceFlavor
    ({}, []),  # 39 empty
    ({"nodeLabels": {"foo": "bar"}, "nodeTaints": [{"key": "spot", "value": "true", "effect": "NoSchedule"}]},
     []),  # 43 valid
    ({"nodeLabels": {"@abc": "foo"}}, [_p("spec.nodeLabels")]),  # 53 invalid label name
    ({"nodeLabels": {"foo": "@abc"}}, [_p("spec.nodeLabels")]),  # 61 invalid label value
])
def test_validate_resource_flavor(spec, want):
    assert _said(resource_flavor({"spec": spec})) == want


def test_fair_sharing_weight():  # common.go validateFairSharing
    assert cluster_queue(_cq(fairSharing={"weight": "-1"})) == \
        ['spec.fairSharing: Invalid value: "-1": must be greater than or equal to 0']
    assert cluster_queue(_cq(fairSharing={"weight": "1n"})) == \
        ['spec.fairSharing: Invalid value: "1n": When not 0, weight must be > 10e-9']
    assert cluster_queue(_cq(fairSharing={"weight": "0"})) == cluster_queue(_cq(fairSharing={"weight": "2n"})) == []


def test_upstream_messages():
    cq = _cq(_rg(_fq("x86", ("cpu", "1", "", "2"))), cohortName="cohort")
    assert cluster_queue(cq) == [f'{F0}.lendingLimit: Invalid value: "2": must be less than or equal to the '
                                 'nominalQuota']
    assert refusals("kueue.x-k8s.io/v1beta1", "ClusterQueue", {**cq, "spec": {**cq["spec"], "cohort": "c"}})
    assert refusals("example.com/v1", "ClusterQueue", cq) == []  # not Kueue's


def test_what_the_crd_refuses_is_said_once(tmp_path):
    """A ClusterQueue's borrowingLimit without a cohort, preemption and flavorFungibility are the CRD's CEL rules
    (SCHEMA-CEL); ADM003 says nothing of them, nor of any object the schema refuses."""
    f = tmp_path / "cq.yaml"
    f.write_text("""apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cel}
spec:
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}
  flavorFungibility: {preference: BorrowingOverPreemption, whenCanBorrow: MayStopSearch}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 64, borrowingLimit: 1}]
""")
    out = subprocess.run([sys.executable, "-m", "policies.cli", "validate", str(f)], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    errors = [line.split()[1] for line in out.splitlines() if line.startswith("error ")]
    assert errors == ["SCHEMA-CEL"] * 3, out
    assert not [p for p in problems_of(f) if p.rule == "ADM003"]


def test_a_refused_cluster_queue_is_said_once(tmp_path):
    """RES010's old fixture (one flavor in two resource groups, as gpus-over-nominal-quota.yaml was before ADM003):
    the webhook refuses the ClusterQueue, so ADM003 says so and RES010 treats the queue as absent."""
    f = tmp_path / "refused.yaml"
    text = (Path(__file__).parent / "fixtures/rules/RES010/fail/gpus-over-nominal-quota.yaml").read_text()
    f.write_text(text.replace('  - coveredResources: ["cpu", "memory", "nvidia.com/gpu"]\n',
                              '  - coveredResources: ["cpu", "memory"]\n').replace(
        '        nominalQuota: 36Gi\n', '        nominalQuota: 36Gi\n  - coveredResources: ["nvidia.com/gpu"]\n'
        '    flavors:\n    - name: "default-flavor"\n      resources:\n'))
    found = [p for p in problems_of(f) if p.severity == "error"]
    assert [p.rule for p in found] == ["ADM003"], [p.line() for p in found]
    assert 'spec.resourceGroups[1].flavors[0].name: Duplicate value: "default-flavor"' in found[0].message


# --- Kueue's Configuration (policies/launchers/kueue_config.py): what stops Kueue from loading it is ADM003's --------

UPSTREAM_CONFIG = Path(__file__).parent / "fixtures/rules/ADM003/pass/kueue-upstream-configuration.yaml"


def _config(text, namespace="kueue-system"):
    """The KueueConfig (or the problems) of a ConfigMap kueue-manager-config holding `text` as its file."""
    from policies.kube.objects import Manifest
    from policies.launchers.kueue_config import configuration
    m = Manifest({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "kueue-manager-config", "namespace": namespace},
                  "data": {"controller_manager_config.yaml": text}}, "cm.yaml")
    return configuration([m])


def test_kueues_own_configuration_loads_defaulted_as_kueue_defaults_it():
    """config/components/manager/controller_manager_config.yaml at v0.19.2, as the release deploys it: its
    integrations, manageJobsWithoutQueueName false, and the default managedJobsNamespaceSelector (every namespace but
    kube-system and Kueue's own: apis/config/v1beta2/defaults.go 124-132)."""
    from policies.launchers.kueue_config import configuration
    from policies.render.loader import parse
    manifests = parse(UPSTREAM_CONFIG.read_text(), str(UPSTREAM_CONFIG))
    cfg, wrong = configuration(manifests)
    assert wrong == [] and cfg is not None
    assert cfg.frameworks == ("batch/job", "kubeflow.org/mpijob", "ray.io/rayjob", "ray.io/raycluster",
                              "ray.io/rayservice", "jobset.x-k8s.io/jobset", "workload.codeflare.dev/appwrapper",
                              "trainer.kubeflow.org/trainjob", "pod", "deployment", "statefulset",
                              "leaderworkerset.x-k8s.io/leaderworkerset")
    assert not cfg.manage_without_queue_name and cfg.exclude_prefixes == () and not cfg.ignore_undeclared
    assert cfg.namespace_selector == {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                            "values": ["kube-system", "kueue-system"]}]}
    assert cfg.manages_namespace("default", None) is True and cfg.manages_namespace("kube-system", None) is False
    assert cfg.where == "Kueue's Configuration (ConfigMap kueue-system/kueue-manager-config)"
    assert not [p for p in problems_of(UPSTREAM_CONFIG) if p.rule == "ADM003"]


HEAD = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


@pytest.mark.parametrize("body,said", [
    ("queueVisibility: {}\n", 'queueVisibility: strict decoding error: unknown field "queueVisibility"'),
    ("manageJobsWithoutQueueName: yes please\n", "manageJobsWithoutQueueName: expected a boolean"),
    # validation.go 616-639: the selector must exempt kube-system and Kueue's namespace
    ("managedJobsNamespaceSelector: {}\n",
     'managedJobsNamespaceSelector: Invalid value: "{}": should not match the "kube-system" namespace'),
    ("namespace: kueue\nmanagedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: kubernetes.io/metadata.name, "
     "operator: NotIn, values: [kube-system]}\n", 'should not match the "kueue" namespace'),
    ("managedJobsNamespaceSelector:\n  matchExpressions:\n  - {key: team, operator: In}\n",
     "managedJobsNamespaceSelector.matchExpressions[0].values: Required value"),
    # validation.go 311-331
    ("integrations:\n  frameworks: [batch/job, kubeflow.org/pytorchjobs]\n",
     "integrations.frameworks[1]: Unsupported value: 'kubeflow.org/pytorchjobs'"),
    ("integrations:\n  frameworks: [batch/job, batch/job]\n", "integrations.frameworks[1]: Duplicate value"),
    # validation.go 110-136
    ("resources:\n  excludeResourcePrefixes: [example.com/]\n  quotaCheckStrategy: IgnoreUndeclared\n",
     'resources.quotaCheckStrategy: Invalid value: "IgnoreUndeclared": excludeResourcePrefixes is not allowed when '
     "quotaCheckStrategy is IgnoreUndeclared"),
    ("resources:\n  quotaCheckStrategy: Ignore\n", 'resources.quotaCheckStrategy: Unsupported value: "Ignore"'),
    ("resources:\n  excludeResourcePrefix: [example.com/]\n", 'unknown field "resources.excludeResourcePrefix"'),
])
def test_a_configuration_kueue_refuses(body, said):
    cfg, wrong = _config(HEAD + body)
    assert cfg is None and any(said in w for _, w in wrong), wrong


def test_what_kueue_reads_of_a_configuration():
    cfg, wrong = _config(HEAD + "manageJobsWithoutQueueName: true\nresources:\n  excludeResourcePrefixes: "
                         "[example.com/, nvidia.com/mig]\n  transformations:\n  - input: nvidia.com/mig-4g.5gb\n")
    assert wrong == [] and cfg is not None and cfg.manage_without_queue_name and cfg.frameworks == ("batch/job",)
    assert cfg.transformed == {"nvidia.com/mig-4g.5gb"}
    assert cfg.counted({"cpu": 1, "example.com/foo": 1, "nvidia.com/mig-1g.5gb": 2, "nvidia.com/gpu": 1}) == \
        {"cpu": 1, "nvidia.com/gpu": 1}  # workload.go 463-478: by prefix
    # quotaCheckStrategy is read only with its gate on (beta and on at v0.19); off, nothing about it is checked
    off, wrong = _config(HEAD + "featureGates: {QuotaCheckStrategy: false}\nresources:\n  quotaCheckStrategy: Ignore\n")
    assert wrong == [] and off is not None and not off.ignore_undeclared
    on, _ = _config(HEAD + "resources:\n  quotaCheckStrategy: IgnoreUndeclared\n")
    assert on is not None and on.ignore_undeclared
    v1beta1, wrong = _config(HEAD.replace("v1beta2", "v1beta1") + "queueVisibility: {}\n")
    assert wrong == [] and v1beta1 is not None
    # a selector on other labels than the name is judged only against a Namespace the manifests hold
    team, _ = _config(HEAD + "managedJobsNamespaceSelector: {matchLabels: {kueue: managed}}\n")
    assert team is not None and team.manages_namespace("ml", None) is None
    assert team.manages_namespace("ml", {"metadata": {"labels": {"kueue": "managed"}}}) is True
    assert team.manages_namespace("ml", {"metadata": {"labels": {}}}) is False
    assert team.manages_namespace("", None) is None


def test_a_configuration_that_is_not_yaml_or_past_the_bounds_is_one_line():
    cfg, wrong = _config("apiVersion: [\n")
    assert cfg is None and len(wrong) == 1 and wrong[0][1].startswith("invalid YAML at line ")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    cfg, wrong = _config(bomb)
    assert cfg is None and len(wrong) == 1 and "excessive aliasing" in wrong[0][1] and "\n" not in wrong[0][1]
    cfg, wrong = _config("- a list\n")
    assert wrong[0][1] == "not a Configuration: the file is not a mapping"


def test_adm003_says_a_configuration_kueue_cannot_load_in_one_line():
    f = Path(__file__).parent / "fixtures/rules/ADM003/fail/kueue-configuration-refused.yaml"
    [p] = [p for p in problems_of(f) if p.rule == "ADM003"]
    assert p.obj == "ConfigMap/kueue-system/kueue-manager-config" and p.field == "data.controller_manager_config.yaml"
    assert "\n" not in p.line() and "Kueue cannot start with this Configuration: resources.quotaCheckStrategy" in \
        p.message
