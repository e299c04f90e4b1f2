"""The render cache never serves a stale render: any file the overlay reads changes the key."""
from __future__ import annotations

import shutil

from conftest import REPO


def copy_repo(tmp_path):
    for d in ("base", "components", "overlays"):
        shutil.copytree(REPO / d, tmp_path / d)
    return tmp_path


def validate(tmp_path, cache):
    import os
    import subprocess
    import sys

    env = dict(os.environ, POLICIES_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "policies.cli", "validate", "--schema", "none",
                           str(tmp_path / "overlays/kind-cpu/indexed-job")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cache_is_used_and_invalidated(tmp_path):
    root = copy_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    assert validate(root, cache).returncode == 0
    entries = list(cache.glob("*.yaml"))
    assert len(entries) == 1
    # A change in the overlay's own patch.
    patch = root / "overlays/kind-cpu/indexed-job/patches/set-topology.yaml"
    patch.write_text(patch.read_text().replace('value: "2"\n            - name: NPROC', 'value: "3"\n            - name: NPROC'))
    proc = validate(root, cache)
    assert proc.returncode == 1 and "TOPO001" in proc.stdout, proc.stdout
    # A change two levels away, in the base the overlay includes.
    patch.write_text(patch.read_text().replace('value: "3"\n            - name: NPROC', 'value: "2"\n            - name: NPROC'))
    assert validate(root, cache).returncode == 0
    svc = root / "base/indexed-job/service.yaml"
    svc.write_text(svc.read_text().replace("clusterIP: None", "clusterIP: 10.96.0.9"))
    proc = validate(root, cache)
    assert proc.returncode == 1 and "TOPO004" in proc.stdout, proc.stdout
    # A change in the environment component.
    svc.write_text(svc.read_text().replace("clusterIP: 10.96.0.9", "clusterIP: None"))
    comp = root / "components/kind-cpu/kustomization.yaml"
    comp.write_text(comp.read_text().replace("DIST_BACKEND=gloo", "DIST_BACKEND=nccl"))
    proc = validate(root, cache)
    assert proc.returncode == 1 and "TOPO007" in proc.stdout, proc.stdout
    assert len(list(cache.glob("*.yaml"))) >= 4


def test_damaged_cache_entry_is_rendered_again(tmp_path):
    root = copy_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    assert validate(root, cache).returncode == 0
    (entry,) = cache.glob("*.yaml")
    entry.write_text("{{{ not yaml")
    assert validate(root, cache).returncode == 0
    assert "ConfigMap" in entry.read_text()


def test_no_cache_env_renders_without_writing(tmp_path, monkeypatch):
    root = copy_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    monkeypatch.setenv("POLICIES_NO_CACHE", "1")
    assert validate(root, cache).returncode == 0
    assert not cache.exists()


def test_parsed_objects_are_used_only_for_the_yaml_they_came_from(tmp_path):
    root = copy_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    assert validate(root, cache).returncode == 0
    (entry,) = cache.glob("*.yaml")
    parsed = entry.with_suffix(".parsed")
    assert parsed.is_file()
    # The YAML entry is the truth: objects parsed from another text are not used.
    entry.write_text(entry.read_text().replace("clusterIP: None", "clusterIP: 10.96.0.9"))
    proc = validate(root, cache)
    assert proc.returncode == 1 and "TOPO004" in proc.stdout, proc.stdout
    # A damaged parsed file: the YAML is parsed again and the file rewritten.
    parsed.write_bytes(b"\x00garbage")
    proc = validate(root, cache)
    assert proc.returncode == 1 and "TOPO004" in proc.stdout, proc.stdout
    assert parsed.read_bytes() != b"\x00garbage"


def test_parsed_objects_from_another_reader_are_not_used(tmp_path):
    """The parsed objects are tagged with the reader's code too (render._READER): after an upgrade that reads YAML
    differently (go-yaml's `2.0` as 2), objects an older reader parsed from the same YAML are parsed again."""
    import marshal

    from policies.render import render

    root = copy_repo(tmp_path / "repo")
    cache = tmp_path / "cache"
    assert validate(root, cache).returncode == 0
    (entry,) = cache.glob("*.yaml")
    parsed = entry.with_suffix(".parsed")
    tag, docs = marshal.loads(parsed.read_bytes())
    assert tag.endswith(render._READER)
    # An older reader's objects for this very YAML, with a Service that is not headless: not used.
    for d in docs:
        if d.get("kind") == "Service":
            d["spec"]["clusterIP"] = "10.96.0.9"
    for older in (tag[: -len(render._READER)], tag[: -len(render._READER)] + "0" * 64):  # as the last release wrote
        parsed.write_bytes(marshal.dumps((older, docs)))
        proc = validate(root, cache)
        assert proc.returncode == 0 and "TOPO004" not in proc.stdout, proc.stdout
        assert marshal.loads(parsed.read_bytes())[0] == tag


def test_prefetched_renders_are_the_renders_collect_asks_for(tmp_path, monkeypatch):
    """The command line starts rendering before the validator is imported (render.prefetch); collect then takes
    those results: each overlay is rendered once, and a failure reaches the report as it would without prefetch."""
    import shutil

    from policies.report import engine
    from policies.render import render

    monkeypatch.setenv("POLICIES_NO_CACHE", "1")
    calls: list[str] = []
    real = render._render_uncached_run

    def counted(folder, *args, **kwargs):
        calls.append(str(folder))
        return real(folder, *args, **kwargs)

    monkeypatch.setattr(render, "_render_uncached_run", counted)
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "base", tree / "base")
    shutil.copytree(REPO / "components", tree / "components")
    shutil.copytree(REPO / "overlays" / "kind-cpu", tree / "overlays" / "kind-cpu")
    broken = tree / "overlays" / "kind-cpu" / "broken"
    broken.mkdir()
    (broken / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    render.prefetch([str(tree / "overlays")])
    assert render._PREFETCHED, "nothing was started ahead"
    units = engine.collect([str(tree / "overlays")], tree)
    assert not render._PREFETCHED  # every result taken
    overlays = sorted(u.source for u in units)
    assert sorted(calls) == overlays  # once each
    bad = [u for u in units if u.failed_input]
    assert [u.source for u in bad] == [str(broken)] and "missing.yaml" in bad[0].problems[0].message
    assert all(u.manifests for u in units if not u.failed_input)


def test_prefetch_never_raises(tmp_path):
    from policies.render import render

    render.prefetch([str(tmp_path / "nothing"), "-", "\0bad"])
    assert not render._PREFETCHED


def test_two_copies_of_an_overlay_each_get_objects_naming_their_own_folder(tmp_path, monkeypatch):
    """Copies of an overlay (make new-env's, a generated tree) hold the same files, so they share the disk cache's
    entry; within a run each still gets its own objects, whose source names its own folder: a suppressed problem's
    source named whichever copy rendered first."""
    from policies.render import render

    root = copy_repo(tmp_path / "repo")
    first, second = root / "overlays/kind-cpu/indexed-job", root / "overlays/kind-cpu/indexed-job-copy"
    shutil.copytree(first, second)
    monkeypatch.setenv("POLICIES_CACHE_DIR", str(tmp_path / "cache"))
    from policies.render import kustomization

    # share_renders() for this test only: the memos are this process's (pytest's worker's) and go back to off.
    for module, name in ((render, "_RUN_MEMO"), (kustomization, "_INPUTS_MEMO"), (kustomization, "_RESOLVED")):
        monkeypatch.setattr(module, name, None)
    render.share_renders()
    a, b, again = render.render(first), render.render(second), render.render(first)
    assert again is a  # the same folder asked again: rendered once
    assert a.source != b.source and b.source.endswith("indexed-job-copy")
    assert {m.source for m in b.manifests} == {b.source} and {m.source for m in a.manifests} == {a.source}
    assert [m.obj for m in a.manifests] == [m.obj for m in b.manifests]
