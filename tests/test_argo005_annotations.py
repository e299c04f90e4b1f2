"""ARGO005's one error: an object whose last-applied-configuration would take its annotations past the API server's
256 KiB (apimachinery v0.36.0 objectmeta.go 36, 58-67) fails to sync under client-side apply, every time; the rest of
the rule is practice (warnings). A repository of its own in tmp_path: gitops.yaml, an Application, the folder it
syncs (a ConfigMap of 300 KiB, or of 200 KiB)."""
from __future__ import annotations

import json

import pytest

from policies.argocd import identity
from policies.argocd.apps import App
from policies.kube.gojson import go_float, go_json, go_number, go_string
from policies.kube.objects import Manifest
from policies.render import gitops
from policies.rules.argo005_sync_policy import (ANNOTATIONS_LIMIT, LAST_APPLIED, Tracking, as_applied,
                                                last_applied_bytes)

from test_rules import problems_of

APP = """apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: big, namespace: argocd}}
spec:
  project: default
  source: {{repoURL: {url}, targetRevision: main, path: big}}
  destination: {{name: in-cluster, namespace: team}}
  syncPolicy:
    syncOptions: [{options}]
"""


ARGOCD_CM = """---
apiVersion: v1
kind: ConfigMap
metadata: {{name: argocd-cm, namespace: argocd}}
data: {{application.resourceTrackingMethod: {method}}}
"""


def _repo(tmp_path, kib: int, options: str = "CreateNamespace=true", annotation: str = "", text: str | None = None,
          method: str | None = None, obj: str | None = None):
    """`text`: the board's content (else `kib` KiB of x); `method`: an argocd-cm beside the Application that sets
    the tracking method; `obj`: the object's YAML instead of the ConfigMap."""
    (tmp_path / "gitops.yaml").write_text("")
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    notes = f"\n  annotations: {{argocd.argoproj.io/sync-options: {annotation}}}" if annotation else ""
    board = 'x' * (kib * 1024) if text is None else text
    (folder / "cm.yaml").write_text(obj or f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboards{notes}\n"
                                           f"data:\n  board.json: {json.dumps(board)}\n")
    app = tmp_path / "app.yaml"
    app.write_text(APP.format(url=identity.EXAMPLE_REPO_URL, options=options)
                   + (ARGOCD_CM.format(method=method) if method else ""))
    return app


def _argo005(app):
    with gitops.repository_url(identity.EXAMPLE_REPO_URL):
        return [p for p in problems_of(app) if p.rule == "ARGO005"]


def test_an_object_past_the_annotation_limit_fails_to_sync_client_side(tmp_path):
    [p] = _argo005(_repo(tmp_path, 300))
    assert p.severity == "error" and "ConfigMap/dashboards in big takes 307,381 bytes (300.2 KiB) of annotations" \
        in p.message
    assert p.field == "spec.syncPolicy.syncOptions" and "ServerSideApply=true" in p.hint


@pytest.mark.parametrize("kib, options, annotation", [
    (200, "CreateNamespace=true", ""),  # within the limit
    (300, "ServerSideApply=true", ""),  # server-side apply keeps no last-applied annotation
    (300, "CreateNamespace=true", "ServerSideApply=true"),  # the object asks for it itself
    (300, "Replace=true", ""),  # kubectl replace (a warning of its own)
])
def test_no_error_where_client_side_apply_does_not_write_it_or_it_fits(tmp_path, kib, options, annotation):
    assert not [p for p in _argo005(_repo(tmp_path, kib, options, annotation)) if p.severity == "error"]


def test_the_count_is_the_compact_json_a_newline_and_the_annotations():
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "annotations": {"k": "v"}}}
    body = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"k":"v"},"name":"a"}}\n'
    assert last_applied_bytes(obj) == len(body) + len("kubectl.kubernetes.io/last-applied-configuration") + 2
    # With no annotation left, kubectl still writes an empty map (SetAnnotations of a non-nil map); an old
    # last-applied-configuration is replaced, not counted.
    bare = {"kind": "A", "metadata": {"annotations": {LAST_APPLIED: "x" * 1000}}}
    assert last_applied_bytes(bare) == len('{"kind":"A","metadata":{"annotations":{}}}\n') + len(LAST_APPLIED)
    assert ANNOTATIONS_LIMIT == 262144


# ---------------------------------------------------------------- Go's encoding/json, from its documented output

def test_go_strings_escape_html_line_separators_and_invalid_utf8():
    assert go_string('<a href="x">&</a>') == '"\\u003ca href=\\"x\\"\\u003e\\u0026\\u003c/a\\u003e"'
    assert go_string("\u2028\u2029") == '"\\u2028\\u2029"'
    assert go_string("\x00\x1f\x7f\b\f\n\r\t\\") == '"\\u0000\\u001f\x7f\\b\\f\\n\\r\\t\\\\"'
    assert go_string("é€😀") == '"é€😀"'  # other characters as their UTF-8 bytes
    assert go_string("a\ud800b") == '"a\\ufffd\\ufffd\\ufffdb"'  # a lone surrogate: three invalid bytes


@pytest.mark.parametrize("value, written", [
    (1.0, "1"), (-2.0, "-2"), (0.5, "0.5"), (100.0, "100"), (123.456, "123.456"), (0.1, "0.1"),
    (1e-6, "0.000001"), (1.5e-6, "0.0000015"), (9.99e-7, "9.99e-7"), (1e-7, "1e-7"), (1.234e-10, "1.234e-10"),
    (1e20, "100000000000000000000"), (1e21, "1e+21"), (1.5e300, "1.5e+300"), (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"), (2.0 ** 63, "9223372036854776000"),
    (-0.0, "-0"),
])
def test_go_floats_as_float_encoder_writes_them(value, written):
    assert go_float(value) == written


def test_go_numbers_as_kubectl_writes_them_after_apimachinery_reads_them_back():
    assert go_number(2 ** 63 - 1) == "9223372036854775807" and go_number(-(2 ** 63)) == "-9223372036854775808"
    assert go_number(2 ** 64 - 1) == "18446744073709552000"  # beyond int64: read back as a float64
    assert go_number(-0.0) == "0"  # Go's -0 is read back as the integer 0
    assert go_json({"b": [1.0, True, None, 2], "a": {}, "c": "x"}) == '{"a":{},"b":[1,true,null,2],"c":"x"}'


# ---------------------------------------------------------------- the object as Argo CD applies it

def _app(dest: str = "team") -> App:
    obj = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "big"},
           "spec": {"destination": {"namespace": dest}}}
    return App(obj, Manifest(obj, "app.yaml"), "spec", "spec")


CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dashboards"}, "data": {"k": "<"}}


def test_the_tracking_annotation_counts_twice_in_argo_cds_format():
    """SetAppInstance writes <app>:<group>/<kind>:<namespace>/<name>, the namespace the destination's for an object
    without one, and kubectl copies it into the last-applied JSON."""
    tracked = as_applied(CM, _app(), Tracking("annotation"))
    note = ("argocd.argoproj.io/tracking-id", "big:/ConfigMap:team/dashboards")
    assert tracked["metadata"] == {"name": "dashboards", "namespace": "team", "annotations": dict([note])}
    body = ('{"apiVersion":"v1","data":{"k":"\\u003c"},"kind":"ConfigMap","metadata":{"annotations":'
            '{"argocd.argoproj.io/tracking-id":"big:/ConfigMap:team/dashboards"},"name":"dashboards",'
            '"namespace":"team"}}\n')
    assert last_applied_bytes(tracked) == len(body) + len(LAST_APPLIED) + len(note[0]) + len(note[1])
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "own"}}
    assert as_applied(job, _app(), Tracking("annotation"))["metadata"]["annotations"] == {
        "argocd.argoproj.io/tracking-id": "big:batch/Job:own/j"}
    # Cluster-scoped: the namespace is cleared, the tracking-id names the destination's (NormalizeTargetObjects).
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r",
                                                                                          "namespace": "x"}}
    meta = as_applied(role, _app(), Tracking("annotation"))["metadata"]
    assert "namespace" not in meta and meta["annotations"][
        "argocd.argoproj.io/tracking-id"] == "big:rbac.authorization.k8s.io/ClusterRole:team/r"
    # A CRD is not tracked (the repo server skips it); label tracking adds a label and no annotation.
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "c"}}
    assert "annotations" not in as_applied(crd, _app(), Tracking("annotation"))["metadata"]
    labelled = as_applied(CM, _app(), Tracking("label"))["metadata"]
    assert labelled["labels"] == {"app.kubernetes.io/instance": "big"} and "annotations" not in labelled
    # The method not known: nothing of Argo CD's is counted, only the namespace.
    assert as_applied(CM, _app(), Tracking())["metadata"] == {"name": "dashboards", "namespace": "team"}


def _python_count(text: str) -> int:
    """What the rule used to count for the test's ConfigMap: Python's json.dumps of it and the annotation's key."""
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dashboards"}, "data": {"board.json": text}}
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()) + len(LAST_APPLIED)


def test_an_object_under_the_limit_in_python_json_is_over_it_in_gos(tmp_path):
    text = "<" * 100 + "x" * (ANNOTATIONS_LIMIT - 300)
    assert _python_count(text) < ANNOTATIONS_LIMIT  # Python writes < as one byte, Go as six
    plain = {**CM, "data": {"board.json": "x" * 100 + text[100:]}}
    assert last_applied_bytes(as_applied(plain, _app(), Tracking())) < ANNOTATIONS_LIMIT  # the escapes decide
    [p] = _argo005(_repo(tmp_path, 0, text=text))
    assert p.severity == "error" and "takes 262,625 bytes (256.5 KiB) of annotations" in p.message


@pytest.mark.parametrize("method, severity", [
    ("annotation", "error"),  # the manifests' argocd-cm says so: certain
    (None, "warning"),  # Argo CD's default, which the installation may have changed
    ("label", None),  # a label of 30 bytes in the JSON, no annotation: it fits
])
def test_the_tracking_annotation_pushes_an_object_over_the_limit(tmp_path, method, severity):
    """The object's own count is 100 bytes under the limit; the tracking annotation
    (argocd.argoproj.io/tracking-id: big:/ConfigMap:team/dashboards) takes 60 bytes as an annotation and 65 more in
    the last-applied JSON."""
    size = as_applied(CM, _app(), Tracking())
    fixed = last_applied_bytes({**size, "data": {"board.json": ""}})
    text = "x" * (ANNOTATIONS_LIMIT - 100 - fixed)
    found = [p for p in _argo005(_repo(tmp_path, 0, text=text, method=method)) if "bytes" in p.message]
    assert [p.severity for p in found] == ([severity] if severity else [])
    if severity == "warning":
        assert "Argo CD its argocd.argoproj.io/tracking-id annotation" in found[0].message
        assert "262,169 bytes" in found[0].message and "262,044 bytes without it" in found[0].message


def test_whole_floats_python_counts_over_the_limit_stay_silent(tmp_path):
    """Python writes 1.0 where Go writes 1: 70,000 of them are 280,000 bytes to Python, 140,000 to Go."""
    points = [1.0] * 70_000
    obj = ("apiVersion: example.com/v1\nkind: Dashboard\nmetadata: {name: floats}\nspec:\n  points: ["
           + ", ".join("1.0" for _ in points) + "]\n")
    loaded = {"apiVersion": "example.com/v1", "kind": "Dashboard", "metadata": {"name": "floats"},
              "spec": {"points": points}}
    assert len(json.dumps(loaded, separators=(",", ":"))) > ANNOTATIONS_LIMIT
    assert last_applied_bytes(loaded) < ANNOTATIONS_LIMIT
    assert not _argo005(_repo(tmp_path, 0, obj=obj))


@pytest.mark.parametrize("fill", ["<", "\u2028", "x"])
@pytest.mark.parametrize("tracking", [Tracking(), Tracking("annotation+label", installation_id="i" * 300)])
def test_an_object_passed_over_before_the_exact_count_is_under_half_the_limit(fill, tracking):
    """_far_under, Python's JSON as a bound of Go's, skips the exact count only where it could not come near the
    limit: checked at sizes on both sides of where it stops skipping, with the characters Go writes longest."""
    from policies.rules.argo005_sync_policy import _far_under, last_applied_bytes
    app = _app()
    skipped = 0
    for n in range(2_000, 40_000, 1_000):
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": {"a": fill * 50}},
               "data": {"k": fill * n, "f": [1e20] * (n // 100)}}
        if _far_under(obj, app, tracking):
            skipped += 1
            exact = last_applied_bytes(as_applied(obj, app, Tracking("annotation+label", tracking.label_key,
                                                                     tracking.installation_id)))
            assert exact <= ANNOTATIONS_LIMIT // 2, (fill, n, exact)
    assert 0 < skipped < 38  # both sides were tried
