"""The one readers of issue 34 item 4 (tests/test_architecture.py checks nobody reads these facts another way): git
runs through policies/git.py with one-line errors and a bounded time, paths are said by files.rel, GPUs are read and
removed by policies/launchers/pods.py under every resource name it knows."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from policies import git
from policies.render.files import rel
from policies.launchers import GPU_RESOURCES, container_resources, drop_gpus, gpu_resources


def test_git_that_cannot_run_or_does_not_answer_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no git here
    with pytest.raises(git.GitError, match=r"^git cannot be run \(.+\)$"):
        git.run(tmp_path, "status")
    monkeypatch.undo()

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])
    monkeypatch.setattr(subprocess, "run", slow)
    with pytest.raises(git.GitError, match=r"^git rev-parse HEAD: no answer in 5 s$"):
        git.run(tmp_path, "rev-parse", "HEAD", timeout=5)


def test_a_git_that_fails_is_its_own_message_on_one_line(tmp_path):
    proc = git.run(tmp_path, "rev-parse", "--git-dir")
    assert proc.returncode != 0 and "not a git repository" in proc.stderr
    with pytest.raises(git.GitError) as exc:
        git.output(tmp_path, "rev-parse", "--git-dir")
    assert str(exc.value).startswith("git rev-parse --git-dir: fatal: not a git repository") and "\n" not in str(exc.value)


def test_rel_says_a_path_below_the_first_folder_that_holds_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "repo" / "a").mkdir(parents=True)
    inside = tmp_path / "repo" / "a" / "f.yaml"
    assert rel(inside) == os.path.join("repo", "a", "f.yaml")  # the working folder by default
    assert rel(inside, tmp_path / "repo") == os.path.join("a", "f.yaml")
    assert rel("/elsewhere/f.yaml", tmp_path / "repo") == "/elsewhere/f.yaml"  # as given, only the folders asked
    assert rel(Path("repo/a/f.yaml")) == os.path.join("repo", "a", "f.yaml")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert rel(loop / "x") in (str(loop / "x"), os.path.join("loop", "x"))  # never fails


@pytest.mark.parametrize("name", GPU_RESOURCES)
def test_every_gpu_resource_name_is_read_and_removed(name):
    assert len(GPU_RESOURCES) > 1 and "amd.com/gpu" in GPU_RESOURCES
    container = {"resources": {"limits": {name: 4, "cpu": "8"}, "requests": {name: 4}}}
    assert container_resources(container)[:2] == (4, 4)
    assert gpu_resources(container["resources"]["limits"]) == [name]
    assert drop_gpus(container["resources"]) == [f"limits.{name}", f"requests.{name}"]
    assert container == {"resources": {"limits": {"cpu": "8"}, "requests": {}}}
