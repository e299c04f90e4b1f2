"""No false drift (issue 36 item 3): argocd/applicationset.yaml ignores every field a controller rewrites in the
workloads of the environments it syncs (argocd.rewritten_fields: the suspend field of each Kueue-queued workload,
read from its launcher, of a kind whose integration the environment's `kueueFrameworks` lists where it declares
them), and respects those ignores when it syncs. Derived defensively, for every queued workload
whether or not its manifest sets the field today (ARGO012 flags only those that do). Environments, launchers and the
ApplicationSet are read from the repository, so the test holds in a fork after `make init` and `make new-env`."""
from __future__ import annotations

import copy

import pytest

from conftest import REPO
from policies.argocd import apps as argocd
from policies.rules import environment
from policies.render.files import read
from policies.kube.values import KUEUE_QUEUE_LABEL
from policies.kube.objects import Manifest
from policies.render.render import render_all

APPSET = REPO / "argocd" / "applicationset.yaml"


def _appset() -> Manifest:
    (appset,) = [m for m in read(str(APPSET)) if m.kind == "ApplicationSet"]
    return appset


def _every_launcher(appset: Manifest) -> Manifest:
    """The ApplicationSet with one generator element per launcher folder of each environment it lists: changing an
    element's launcher is a one-line pull request, and the ignores must already hold for it."""
    obj = copy.deepcopy(appset.obj)
    for gen in obj["spec"]["generators"]:
        elements = []
        for e in gen["list"]["elements"]:
            folders = sorted(p.parent.name for p in (REPO / "overlays" / e["env"]).glob("*/kustomization.yaml"))
            elements += [{**e, "launcher": launcher} for launcher in folders]
        gen["list"]["elements"] = elements
    return Manifest(obj, appset.source)


def missing(appset: Manifest) -> list[str]:
    """What the ApplicationSet's Applications do not ignore (or do not respect) of the fields a controller rewrites in
    the workloads their paths render: one line per Application, object and field."""
    apps = list(argocd.expand(appset))
    rendered = render_all([REPO / str(a.spec["source"]["path"]) for a in apps])
    out = []
    for app, r in zip(apps, rendered):
        assert r.error is None and r.manifests, (app.name, r.error)
        frameworks = environment.kueue_frameworks(REPO / str(app.spec["source"]["path"]))
        out += [f"{app.name} ({app.spec['source']['path']}): {m.ref} {e.yaml()}" +
                ("" if argocd.RESPECT_IGNORE_DIFFERENCES in app.options else f" + {argocd.RESPECT_IGNORE_DIFFERENCES}")
                for m, e in argocd.unguarded(app, r.manifests, frameworks=frameworks)]
    return out


def needed(appset: Manifest) -> list[argocd.IgnoreEntry]:
    apps = list(argocd.expand(appset))
    rendered = render_all([REPO / str(a.spec["source"]["path"]) for a in apps])
    return sorted({e for a, r in zip(apps, rendered) for _, e in argocd.rewritten_fields(
        r.manifests, frameworks=environment.kueue_frameworks(REPO / str(a.spec["source"]["path"])))},
                  key=lambda e: (e.group, e.kind, e.pointer))


def _without(appset: Manifest, entry: argocd.IgnoreEntry) -> Manifest:
    """The ApplicationSet with the entry's pointer taken out of the template's ignoreDifferences."""
    obj = copy.deepcopy(appset.obj)
    for e in obj["spec"]["template"]["spec"].get("ignoreDifferences") or []:
        if (e.get("group") or "", e.get("kind")) == (entry.group, entry.kind):
            e["jsonPointers"] = [p for p in e.get("jsonPointers") or [] if p != entry.pointer]
    return Manifest(obj, appset.source)


def test_applicationset_ignores_what_kueue_rewrites_in_every_environment():
    gaps = missing(_appset())
    assert not gaps, "add these to argocd/applicationset.yaml's template:\n" + "\n".join(gaps)


def test_applicationset_ignores_it_for_every_launcher_an_environment_can_switch_to():
    gaps = missing(_every_launcher(_appset()))
    assert not gaps, "add these to argocd/applicationset.yaml's template:\n" + "\n".join(gaps)


def test_removing_an_entry_fails_the_check():
    appset = _every_launcher(_appset())
    entries = needed(appset)
    if not entries:
        pytest.skip("no environment of this repository labels a workload with a Kueue queue")
    for entry in entries:
        gaps = missing(_without(appset, entry))
        assert any(entry.yaml() in g for g in gaps), (entry, gaps)


def test_without_respect_ignore_differences_the_check_fails():
    appset = _every_launcher(_appset())
    if not needed(appset):
        pytest.skip("no environment of this repository labels a workload with a Kueue queue")
    obj = copy.deepcopy(appset.obj)
    options = obj["spec"]["template"]["spec"]["syncPolicy"]["syncOptions"]
    obj["spec"]["template"]["spec"]["syncPolicy"]["syncOptions"] = [
        o for o in options if o != argocd.RESPECT_IGNORE_DIFFERENCES]
    gaps = missing(Manifest(obj, appset.source))
    assert gaps and all(argocd.RESPECT_IGNORE_DIFFERENCES in g for g in gaps), gaps


# ---------------------------------------------------------------- the derivation itself, on objects written here


def _job(labels: dict | None, **spec) -> Manifest:
    return Manifest({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "labels": labels},
                     "spec": {"template": {"spec": {"containers": []}}, **spec}}, "<test>")


def _app(ignore: list | None, options: list[str]) -> argocd.App:
    obj = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "a"},
           "spec": {"destination": {"namespace": "ns"}, "syncPolicy": {"automated": {}, "syncOptions": options},
                    **({"ignoreDifferences": ignore} if ignore is not None else {})}}
    return argocd.App(obj, Manifest(obj, "<test>"), "spec", "spec")


QUEUED = {KUEUE_QUEUE_LABEL: "q"}
RESPECT = [argocd.RESPECT_IGNORE_DIFFERENCES]


def test_only_queued_workloads_with_a_suspend_field_need_an_entry():
    assert [e for _, e in argocd.rewritten_fields([_job(QUEUED)])] == [argocd.IgnoreEntry("batch", "Job",
                                                                                           "/spec/suspend")]
    assert not argocd.rewritten_fields([_job(None)])
    assert not argocd.rewritten_fields([_job({KUEUE_QUEUE_LABEL: ""})])  # Kueue: an empty name is no queue
    # Kueue v0.19.2 reads the label only; the old annotation of the same key queues nothing.
    annotated = _job(None)
    annotated.obj["metadata"]["annotations"] = QUEUED
    assert not argocd.rewritten_fields([Manifest(annotated.obj, "<test>")])
    sts = Manifest({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "labels": QUEUED},
                    "spec": {}}, "<test>")
    assert not argocd.rewritten_fields([sts])  # no suspend field: Kueue gates its pods instead
    # Kueue suspends a queued AppWrapper too (it starts no pods itself: its components' controllers do).
    aw = Manifest({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
                   "metadata": {"name": "a", "labels": QUEUED}, "spec": {"components": []}}, "<test>")
    assert [e for _, e in argocd.rewritten_fields([aw])] == [argocd.IgnoreEntry("workload.codeflare.dev", "AppWrapper",
                                                                                "/spec/suspend")]
    assert not argocd.rewritten_fields([_job(QUEUED)], set_only=True)
    assert argocd.rewritten_fields([_job(QUEUED, suspend=False)], set_only=True)


@pytest.mark.parametrize("ignore, options, guarded", [
    ([{"group": "batch", "kind": "Job", "jsonPointers": ["/spec/suspend"]}], RESPECT, True),
    ([{"group": "batch", "kind": "Job", "jsonPointers": ["/spec/suspend"]}], [], False),
    ([{"group": "*", "kind": "Job", "jsonPointers": ["/spec"]}], RESPECT, True),  # a glob, a parent pointer
    ([{"group": "batch", "kind": "Job", "jqPathExpressions": [".spec.suspend"]}], RESPECT, True),
    ([{"group": "batch", "kind": "Job", "name": "other", "jsonPointers": ["/spec/suspend"]}], RESPECT, False),
    ([{"group": "batch", "kind": "Job", "namespace": "ns", "jsonPointers": ["/spec/suspend"]}], RESPECT, True),
    ([{"group": "batch", "kind": "Job", "jsonPointers": ["/spec/suspended"]}], RESPECT, False),
    ([{"group": "apps", "kind": "Job", "jsonPointers": ["/spec/suspend"]}], RESPECT, False),
    ([{"kind": "Job", "jsonPointers": ["/spec/suspend"]}], RESPECT, False),  # no group: the core group only
    (None, RESPECT, False),
    (["not a mapping", {"group": "batch", "kind": "Job", "jsonPointers": "/spec/suspend"}], RESPECT, False),
])
def test_what_argo_cd_counts_as_ignored(ignore, options, guarded):
    assert (not argocd.unguarded(_app(ignore, options), [_job(QUEUED)])) is guarded


def test_a_kind_whose_integration_the_environment_leaves_off_needs_no_entry():
    """Kueue sets up the webhook and reconciler of an enabled integration only (v0.19.2
    pkg/controller/jobframework/setup.go:76, 108-111): where the environment declares `kueueFrameworks` without
    batch/job, a queued Job's suspend field is the manifest's own; where nothing is declared, it counts as before."""
    job = _job(QUEUED, suspend=False)
    assert argocd.rewritten_fields([job]) and argocd.rewritten_fields([job], frameworks=None)
    assert argocd.rewritten_fields([job], frameworks=["batch/job"])
    assert not argocd.rewritten_fields([job], frameworks=["kubeflow.org/pytorchjob"])
    assert not argocd.rewritten_fields([job], frameworks=[])
    unguarded = argocd.unguarded(_app(None, RESPECT), [job], set_only=True, frameworks=["kubeflow.org/pytorchjob"])
    assert not unguarded


def test_the_environment_of_a_rendered_folder_gives_its_frameworks():
    """What ARGO012 and the drift test read for a folder: its environment's kueueFrameworks, None without any."""
    off = REPO / "tests" / "fixtures" / "argocd" / "targets" / "pytorchjob-integration-off"
    assert environment.kueue_frameworks(off) == ["batch/job", "jobset.x-k8s.io/jobset",
                                                 "trainer.kubeflow.org/trainjob"]
    assert environment.kueue_frameworks(REPO / "tests" / "fixtures" / "overlays" / "name-prefix") is None
