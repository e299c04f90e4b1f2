"""The loader builds documents in the same pass that checks their bounds (policies/render/loader.py `_walk`), leaving to
PyYAML's own loader (`_StrictLoader`) what the one-pass builder does not read itself. Either way the result must
be exactly what `yaml.load_all(text, Loader=_StrictLoader)` gives, or the same refusal: checked here on every YAML
file in the repository, on the generated hostile inputs' building blocks and on the corners of YAML 1.1 that
PyYAML and kubectl's sigs.k8s.io/yaml read in a particular way."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from policies.render import loader
from policies.render.loader import InputError, _StrictLoader, _walk, parse

SKIP = (".venv", ".sim", ".cache", ".git", "node_modules")


def _same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))  # type: ignore[arg-type]
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _reference(text: str) -> tuple[list[object] | None, str | None]:
    try:
        return list(yaml.load_all(text, Loader=_StrictLoader)), None
    except yaml.YAMLError as exc:
        return None, type(exc).__name__


def _one_pass(text: str) -> tuple[list[object] | None, bool]:
    """(documents, whether the builder read them itself)."""
    built = _walk(text, "x.yaml", build=True)
    return (built, True) if built is not None else (list(yaml.load_all(text, Loader=_StrictLoader)), False)


CORNERS = {
    # YAML 1.1 scalars as PyYAML resolves them (and go-yaml v2 under kubectl)
    "bools": "a: yes\nb: No\nc: on\nd: OFF\ne: true\nf: 'yes'\ng: y\n",
    "numbers": "a: 0o17\nb: 017\nc: 0x1F\nd: 0b101\ne: 1_000\nf: 1:20\ng: 1.5e3\nh: 1e3\ni: .inf\nj: -.INF\nk: .nan\n"
               "l: +12\nm: 3.\np: 190:20:30.15\nq: 08\nr: +.5\ns: 0X1F\nt: y\nu: N\n",
    "nulls": "a: ~\nb: null\nc:\nd: Null\ne: ''\n",
    "timestamps": "a: 2001-12-14t21:59:43.10-05:00\nb: 2002-12-14\nc: '2002-12-14'\n",
    "strings": "a: |\n  two\n  lines\nb: >-\n  folded\n  text\nc: \"q\\u00e9\"\nd: 'it''s'\ne: plain text here\n",
    "tags": "a: !!str 5\nb: !!int '7'\nc: ! 5\nd: !!float 1\ne: !!null ''\nf: !!bool 'yes'\n",
    "binary": "a: !!binary aGVsbG8=\n",
    "custom tag": "a: !Ref thing\n",
    "merge": "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n",
    "merge list": "a: &a {x: 1}\nb: &b {y: 2}\nc: {<<: [*a, *b], z: 3}\n",
    "value key": "a: {=: 1}\n",
    "int keys": "5: five\ntrue: t\n1.5: f\n~: n\n",
    "duplicate key": "a: 1\nb: 2\na: 3\n",
    "anchors": "a: &x [1, 2, {k: &y v}]\nb: *x\nc: *y\nd: &z\n  deep: [*x]\ne: *z\n",
    "alias key": "a: &k name\n*k : value\n",
    "undefined alias": "a: *nothing\n",
    "duplicate anchor": "a: &x 1\nb: &x 2\n",
    "duplicate collection anchor": "a: &x {k: 1}\nb: &x [2]\n",
    "empty documents": "---\n---\n...\n---\na: 1\n---\n",
    "scalar document": "--- just text\n--- 5\n---\n- a\n- b\n",
    "flow": "a: {b: [1, {c: d}], e: []}\nf: {}\n",
    "set": "s: !!set {a, b}\n",
    "omap": "o: !!omap [a: 1, b: 2]\n",
    "complex key": "? [a, b]\n: value\n",
    "mapping key": "? {a: 1}\n: value\n",
    "explicit map tag": "a: !!map {b: 1}\nc: !!seq [1]\n",
    "directive": "%YAML 1.1\n---\na: 1\n",
    "anchor on document": "--- &d\na: 1\n",
    "bad syntax": "a: [1, 2\n",
    "tab indent": "a:\n\tb: 1\n",
    "unicode": "name: \"\\u2603 snow\"\nemoji: 🙂\n",
}


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_corners_read_as_pyyaml_reads_them(name: str) -> None:
    text = CORNERS[name]
    ref, err = _reference(text)
    if err is not None:
        with pytest.raises(yaml.YAMLError):
            _one_pass(text)
        return
    got, _ = _one_pass(text)
    assert _same(got, ref), (got, ref)


def test_the_builder_reads_the_common_cases_itself() -> None:
    """The fast path is taken for what manifests hold (so the second parse is really gone), and left where it must."""
    for name in ("bools", "numbers", "nulls", "timestamps", "strings", "anchors", "empty documents", "flow"):
        assert _one_pass(CORNERS[name])[1], name
    for name in ("tags", "binary", "custom tag", "merge", "int keys", "duplicate key", "set", "complex key"):
        assert _walk(CORNERS[name], "x.yaml", build=True) is None, name


def _repository_yaml() -> list[Path]:
    return sorted(p for pattern in ("**/*.yaml", "**/*.yml") for p in REPO.glob(pattern)
                  if not any(part in SKIP for part in p.relative_to(REPO).parts))


def test_every_yaml_file_in_the_repository_reads_the_same() -> None:
    files = _repository_yaml()
    assert len(files) > 300, len(files)  # overlays, bases, fixtures, the corpus
    built = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        ref, err = _reference(text)
        if err is not None:
            with pytest.raises((yaml.YAMLError, InputError)):
                _one_pass(text)
            continue
        got, fast = _one_pass(text)
        built += fast
        assert _same(got, ref), path
    assert built > 0.9 * len(files), built


def test_mutated_manifests_read_the_same() -> None:
    """Manifests with scalars swapped for YAML 1.1 corner values, keys duplicated, merge keys, anchors and aliases
    added: the same documents or the same refusal."""
    rng = random.Random(7)
    sources = [p.read_text(encoding="utf-8") for p in _repository_yaml()
               if "overlays" not in p.parts and p.stat().st_size < 16384][:120]
    odd = ["yes", "0o17", "0x1F", "1:20", "~", "'5'", "!!str 3", "*nope", "2001-12-14", ".inf", "<<", "!!binary aGk=",
           "&an x", "[a, b]", "{a: 1}", "-", ": x", "'", "\"\\x\""]
    for i in range(400):
        lines = rng.choice(sources).splitlines()
        if not lines:
            continue
        for _ in range(rng.randint(1, 3)):
            j = rng.randrange(len(lines))
            line = lines[j]
            if ": " in line and rng.random() < 0.7:
                key, _, _ = line.partition(": ")
                lines[j] = f"{key}: {rng.choice(odd)}"
            else:
                lines.insert(j, lines[j])
        text = "\n".join(lines) + "\n"
        ref, err = _reference(text)
        if err is not None:
            with pytest.raises((yaml.YAMLError, InputError)):
                _one_pass(text)
            continue
        try:
            got, _ = _one_pass(text)
        except InputError:
            continue  # a bound (aliasing) the reference loader does not check
        assert _same(got, ref), (i, text)


def test_parse_gives_the_same_manifests_and_messages() -> None:
    good = (REPO / "tests/corpus").glob("**/*.yaml")
    for path in sorted(good)[:20]:
        text = path.read_text(encoding="utf-8")
        try:
            fast = [m.obj for m in parse(text, path.name)]
        except loader.NotKubernetes as exc:  # the corpus's index.yaml: both readers say so
            fast = str(exc)
        try:
            slow = [m.obj for m in loader.objects(list(yaml.load_all(text, Loader=_StrictLoader)), path.name)]
        except loader.NotKubernetes as exc:
            slow = str(exc)
        assert fast == slow
    for text, words in (("a: 1\na: 2\n", "duplicate key 'a'"), ("a: *x\n", "undefined alias"),
                        ("a: !!set {b}\n", "tag set has no JSON form"), ("a: [1\n", "invalid YAML")):
        with pytest.raises(InputError, match=words.replace("(", r"\(")):
            parse(text, "f.yaml")
