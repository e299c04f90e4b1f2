"""The one edit pipeline (policies/edit/pipeline.py) in-process, on a folder of its own: the validator decides whether
anything is written, a dry run prints the diff and writes nothing, a half-written scope is finished first (or
refused by a dry run), and a scope's recovery never deletes the temporary files an inner scope's journal names.
The commands' own runs, killed between their journal and their renames, are in tests/test_scale_transaction.py,
test_init.py, test_new_env.py, test_remove_env.py and test_pin_image.py."""
from __future__ import annotations

import hashlib
import json

import pytest

from policies.edit import pipeline as edit
from policies.render import transaction
from policies.edit.yamledit import EditError


def scope(folder, **kw):
    return edit.Scope(folder=folder, locks=(edit.Lock(folder),), name="test", half_written=lambda: "half written",
                      shown=lambda p: str(p.relative_to(folder)), **kw)


@pytest.fixture()
def folder(tmp_path):
    (tmp_path / "a.yaml").write_text("a: 1\n")
    (tmp_path / "b.yaml").write_text("b: 1\n")
    return tmp_path


def test_a_validator_error_writes_nothing(folder, capsys):
    seen = []

    def validate(changes):
        seen.append(dict(changes))
        return ["error X a.yaml: no"]

    rc = edit.apply(scope(folder), lambda _s: {folder / "a.yaml": "a: 2\n", folder / "b.yaml": "b: 1\n"}, validate,
                    dry_run=False)
    assert rc == 1 and (folder / "a.yaml").read_text() == "a: 1\n"
    assert seen == [{folder / "a.yaml": "a: 2\n"}]  # files already right are left out before validation
    err = capsys.readouterr().err
    assert err == "error: test: the result does not validate, so nothing was written:\n  error X a.yaml: no\n"


def test_a_dry_run_prints_the_diff_and_writes_nothing(folder, capsys):
    rc = edit.apply(scope(folder), lambda _s: {folder / "a.yaml": "a: 2\n", folder / "c.yaml": "c: 1\n",
                                               folder / "b.yaml": None}, lambda c: [], dry_run=True)
    out, err = capsys.readouterr()
    assert rc == 0 and not (folder / "c.yaml").exists() and (folder / "b.yaml").exists()
    assert "--- a/a.yaml\n+++ b/a.yaml\n" in out and "--- /dev/null\n+++ b/c.yaml\n" in out
    assert "--- a/b.yaml\n+++ /dev/null\n" in out
    assert err == "dry run: nothing was written (2 files would change, 1 would be deleted)\n"


def test_every_file_is_written_and_deleted(folder, capsys):
    rc = edit.apply(scope(folder), lambda _s: {folder / "a.yaml": "a: 2\n", folder / "new/c.yaml": "c: 1\n",
                                               folder / "b.yaml": None}, None, dry_run=False)
    assert rc == 0 and capsys.readouterr().out == "wrote a.yaml\nwrote new/c.yaml\ndeleted b.yaml\n"
    assert (folder / "a.yaml").read_text() == "a: 2\n" and (folder / "new/c.yaml").read_text() == "c: 1\n"
    assert not (folder / "b.yaml").exists() and not (folder / transaction.JOURNAL).exists()
    again = edit.apply(scope(folder), lambda _s: {folder / "a.yaml": "a: 2\n"}, None, dry_run=False)
    assert again == 0 and capsys.readouterr().out == "test: nothing to change\n"


def _half_written(folder, target, text):
    """A journal whose temporary file is there and not yet renamed: what a run killed after its journal leaves."""
    tmp = target.with_name(f".{target.name}.1-0{transaction.TMP_SUFFIX}")
    tmp.write_text(text)

    def sha(data):
        return hashlib.sha256(data).hexdigest()

    (folder / transaction.JOURNAL).write_text(json.dumps({"version": 1, "files": [
        {"target": str(target.relative_to(folder)), "tmp": str(tmp.relative_to(folder)),
         "old": sha(target.read_bytes()), "new": sha(text.encode())}]}))
    return tmp


def test_a_half_written_scope_is_finished_first_and_refused_by_a_dry_run(folder, capsys):
    _half_written(folder, folder / "a.yaml", "a: 9\n")
    with pytest.raises(EditError, match="half written"):
        edit.apply(scope(folder), lambda _s: {}, None, dry_run=True)
    assert (folder / "a.yaml").read_text() == "a: 1\n"
    finished = []
    rc = edit.apply(scope(folder), lambda s: finished.extend(s.finished), None, dry_run=False)
    assert rc == 0 and finished == [folder / "a.yaml"] and (folder / "a.yaml").read_text() == "a: 9\n"
    assert capsys.readouterr().err == "finished the change an interrupted run began: wrote a.yaml\n"
    assert not (folder / transaction.JOURNAL).exists()


def test_an_inner_journal_is_finished_first_and_the_outer_keeps_its_temporary_files(folder):
    """The repository's scope holds components/' lock: an interrupted pin there is finished first, and the root's
    own pending journal's temporary files under components/ are never deleted as the pin's strays."""
    inner = folder / "components"
    inner.mkdir()
    (inner / "k.yaml").write_text("k: 1\n")
    (inner / "m.yaml").write_text("m: 1\n")
    outer_tmp = _half_written(folder, inner / "m.yaml", "m: 2\n")  # the root's journal names a file under components/
    stray = inner / f".k.yaml.7-0{transaction.TMP_SUFFIX}"  # a pin killed before its journal: a stray
    stray.write_text("k: 5\n")
    outer = edit.Scope(folder=folder, locks=(edit.Lock(folder), edit.Lock(inner)), name="outer",
                       half_written=lambda: "half", shown=lambda p: str(p.relative_to(folder)),
                       inner=(scope(inner),))
    assert edit.apply(outer, None, None, dry_run=False) == 0
    assert not stray.exists() and not outer_tmp.exists()
    assert (inner / "m.yaml").read_text() == "m: 2\n" and (inner / "k.yaml").read_text() == "k: 1\n"
