"""The user docs' command blocks run as written, and their real output is what the commands print.

Every shell block in README.md, docs/deploy.md, docs/environments.md and docs/trainer.md carries a marker on the line
above it: `<!-- run -->` (this test runs it), or `<!-- not run: <what it needs> -->` (a cluster, Docker, a
registry: said, not run). Every block shown as output carries `<!-- output: <command> -->` (the command is run and
prints exactly that), `<!-- output of: <command> -->` (what that line of an earlier `run` block printed) or
`<!-- output shape of: <command> -->` (the same lines with the same fields, where the figures cannot be the same:
timings, or a model built from the repository's own Markdown). Each document runs in order, to the end, on a fresh
copy of the repository (its working tree committed as `main` in a new git repository, `.venv` linked): a new user's
shell, the venv not on PATH. Paths under /tmp/ are the test's own temporary folder; the timings of a line
(`(0.09 s)`, `samples/s=612`), commit ids and the host name are compared as placeholders, and the trainer's losses
and accuracies within a tolerance (`close`)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO, run_bounded

DOCS = ("README.md", "docs/deploy.md", "docs/environments.md", "docs/trainer.md")
SHELL = {"sh", "bash", "shell", "console"}
_MARKER = re.compile(r"^<!-- (run|not run: .+|output: .+|output of: .+|output shape of: .+) -->$")


@dataclass
class Block:
    line: int
    lang: str
    text: str
    marker: str | None  # the text inside <!-- ... -->
    before: str  # the prose just above it

    @property
    def kind(self) -> str:
        return (self.marker or "").split(":", 1)[0]

    @property
    def arg(self) -> str:
        return (self.marker or "").split(":", 1)[1].strip() if ":" in (self.marker or "") else ""


def blocks(doc: str) -> list[Block]:
    lines = (REPO / doc).read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j] != "```":
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = _MARKER.match(lines[k]) if k >= 0 else None
        prose_end = k - 1 if marker else k
        start = prose_end
        while start > 0 and lines[start - 1].strip() and not lines[start - 1].startswith("```"):
            start -= 1
        out.append(Block(i + 1, m.group(1), "\n".join(lines[i + 1:j]), marker.group(1) if marker else None,
                         " ".join(lines[start:prose_end + 1])))
        i = j + 1
    return out


@pytest.mark.parametrize("doc", DOCS)
def test_every_command_block_says_whether_it_runs_and_every_real_output_is_checked(doc):
    found = blocks(doc)
    assert found, doc
    for b in found:
        where = f"{doc}:{b.line}"
        if b.lang in SHELL:
            assert b.kind in ("run", "not run"), f"{where}: a command block without <!-- run --> or <!-- not run: ... -->"
            if b.kind == "not run":
                assert len(b.arg) > 8, f"{where}: say what it needs"
        elif b.kind.startswith("output"):
            assert b.lang == "", f"{where}: an output block is a plain fence"
        if "real output" in b.before.lower() or "(real output" in b.before.lower():
            assert b.kind in ("output", "output of"), f"{where}: shown as real output but nothing checks it"
        if b.kind in ("output of", "output shape of"):
            runs = [x for x in found if x.kind == "run" and x.line < b.line]
            assert any(_key(b.arg) in commands(x.text) for x in runs), f"{where}: no earlier run block has {b.arg}"


def test_the_test_command_is_what_ci_runs():
    (block,) = [b for b in blocks("README.md") if b.kind == "not run" and "test suite" in b.arg]
    assert block.text.strip() == "make test"
    assert (REPO / ".ci/run").read_text().rstrip().endswith("exec make test")


# ---------------------------------------------------------------- running a document


def _key(command: str) -> str:
    return " ".join(re.sub(r"\s+#\s.*$", "", command).split())


def commands(text: str) -> list[str]:
    """A block's commands: continuation lines joined, comments and blank lines left out."""
    out, pending = [], ""
    for line in text.splitlines():
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1]
            continue
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(_key(line))
    return out


def fresh_copy(dest: Path, own_venv: bool = False) -> Path:
    """The working tree as a new repository on `main` (what a clone of this branch holds), the venvs linked; with
    `own_venv`, `.venv` is a venv of the copy's own (the checkout's files hard-linked where the file system allows,
    copied where not), so that what resolves the venv's path finds it inside the copy, as in a fork's clone."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = REPO / name
        if src.is_file() and not src.is_symlink():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for venv in (".venv", ".venv-checkov"):
        if not (REPO / venv).exists():
            continue
        if own_venv and venv == ".venv":
            if subprocess.run(["cp", "-al", str(REPO / venv), str(dest / venv)], capture_output=True).returncode:
                shutil.rmtree(dest / venv, ignore_errors=True)
                shutil.copytree(REPO / venv, dest / venv, symlinks=True)
        else:
            (dest / venv).symlink_to(REPO / venv)
    git = ["git", "-C", str(dest)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (dest / ".git/info/exclude").write_text(".venv\n.venv-checkov\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a fresh copy"], check=True, env=_env(dest))
    return dest


def _env(copy: Path) -> dict[str, str]:
    venv_bin = str(REPO / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "OMP_NUM_THREADS",
                                                              "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and Path(p).resolve() != Path(venv_bin).resolve()
                                  and Path(p).resolve() != Path(sys.executable).parent.resolve())
    env.update(GIT_AUTHOR_NAME="Doc Reader", GIT_AUTHOR_EMAIL="reader@example.com",
               GIT_COMMITTER_NAME="Doc Reader", GIT_COMMITTER_EMAIL="reader@example.com")
    return env


def _script(text: str, out: Path, first: int) -> tuple[str, list[str]]:
    """The block as one bash script that keeps each command's standard output in a file of its own."""
    cmds = commands(text)
    lines, keys = ["set -e -o pipefail"], []
    for n, cmd in enumerate(cmds, first):
        lines += [f"{{ {cmd}", f"}} > {out}/{n}", f"cat {out}/{n}"]
        keys.append(cmd)
    return "\n".join(lines) + "\n", keys


def normalise(text: str, tmp: Path, copy: Path) -> list[str]:
    text = text.replace(str(tmp), "/tmp").replace(str(copy) + "/", "").replace(str(copy), ".")
    text = re.sub(r"\((?:\d+(?:\.\d+)?|\.\.\.) s\)", "(... s)", text)
    text = re.sub(r"(HEAD~?\d*) \((?:[0-9a-f]{7,40}|\.\.\.)\)", r"\1 (...)", text)
    text = re.sub(r"\b(samples/s|tokens/s|train_s|cpu_s|total_s|host)=\S+", r"\1=…", text)
    return [ln.rstrip() for ln in text.rstrip("\n").splitlines()]


def shape(line: str) -> str:
    line = re.sub(r"=\S+", "=…", line)
    return re.sub(r"\d+(?:\.\d+)?", "0", " ".join(line.split()))


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def close(want: str, have: str) -> bool:
    """The same line, or the same line where the trainer's floating-point figures (losses, accuracies: reproducible
    on one machine, not bit for bit across CPUs) differ by at most 5 % or 0.01; whole numbers (steps, epochs,
    sizes) must be equal."""
    if want == have:
        return True
    if _NUMBER.sub("0", want) != _NUMBER.sub("0", have):
        return False
    for w, h in zip(_NUMBER.findall(want), _NUMBER.findall(have)):
        if "." not in w or "." not in h:
            if w != h:
                return False
        elif abs(float(w) - float(h)) > max(0.05 * abs(float(w)), 0.01):
            return False
    return True


def _subsequence(want: list[str], got: list[str]) -> list[str]:
    """The lines of `want` not found in `got` in order (empty: all are)."""
    it = iter(got)
    return [w for w in want if not any(w == g for g in it)]


def run_document(doc: str, tmp: Path) -> None:
    copy = fresh_copy(tmp / "repo")
    work = tmp / "tmp"
    work.mkdir()
    outs = tmp / "outputs"
    outs.mkdir()
    env = _env(copy)
    recorded: dict[str, Path] = {}
    n = 0
    for b in blocks(doc):
        where = f"{doc}:{b.line}"
        if b.kind == "run":
            script, keys = _script(b.text.replace("/tmp/", f"{work}/"), outs, n)
            proc = run_bounded(["bash", "-c", script], 800, cwd=copy, env=env)
            assert proc.returncode == 0, f"{where}: exit {proc.returncode}\n{(proc.stdout + proc.stderr)[-4000:]}"
            for i, key in enumerate(keys, n):
                recorded.setdefault(_key(key.replace(f"{work}/", "/tmp/")), outs / str(i))
            n += len(keys)
        elif b.kind.startswith("output"):
            if b.kind == "output":
                proc = run_bounded(["bash", "-o", "pipefail", "-c", b.arg.replace("/tmp/", f"{work}/")], 800,
                                   cwd=copy, env=env)
                got = proc.stdout
            else:
                assert _key(b.arg) in recorded, f"{where}: `{b.arg}` did not run in an earlier block"
                got = recorded[_key(b.arg)].read_text()
            want = normalise(b.text, work, copy)
            have = normalise(got, work, copy)
            if not any(ln.startswith("[TRAIN]") for ln in want):
                have = [ln for ln in have if not ln.startswith("[TRAIN]")]
            if b.kind == "output shape of":
                missing = _subsequence([shape(w) for w in want], [shape(h) for h in have])
                assert not missing, f"{where}: no line of this shape in the output: {missing[0]}\n" + "\n".join(have)
            else:
                assert len(have) == len(want) and all(close(w, h) for w, h in zip(want, have)), \
                    f"{where}: the command now prints\n" + "\n".join(have)


# The documents that walk through the template from its example identity (README's outputs name the example's
# image; docs/deploy.md begins with `make init` from the example): in a fork that `make init` made its own they
# describe where the fork came from, and tests/test_fork.py is what checks the fork's own flow.
TEMPLATE_WALKTHROUGHS = ("README.md", "docs/deploy.md")


def skip_in_a_fork(what: str) -> None:
    """Skip, saying why, where this checkout is a fork that `make init` made its own (gitops.yaml's identity names
    another repository than the template's example)."""
    from policies.argocd import identity

    url = identity.load(REPO).repo_url
    if not identity.is_example_repo(url):
        pytest.skip(f"{what} walks through the template from its example identity; this repository is a fork "
                    f"(gitops.yaml names {url}): tests/test_fork.py ran that flow in the template")


@pytest.mark.parametrize("doc", DOCS)
def test_the_document_runs_to_the_end_and_prints_what_it_shows(doc, tmp_path):
    if doc in TEMPLATE_WALKTHROUGHS:
        skip_in_a_fork(doc)
    run_document(doc, tmp_path)


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    """README.md and docs/*.md link each other by path and heading: a renamed heading or file breaks no link."""
    broken = []
    for doc in [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]:
        for link in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if not target.exists():
                broken.append(f"{doc.relative_to(REPO)}: {link} (no such file)")
            elif anchor and target.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", target.read_text(), re.M)}
                if anchor not in headings:
                    broken.append(f"{doc.relative_to(REPO)}: {link} (no such heading)")
    assert not broken, broken
