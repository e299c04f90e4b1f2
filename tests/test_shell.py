"""policies/command/shell.py: the containers' shell scripts read with mvdan/sh's parser and evaluated only as far as the
manifest shows. Every value it says it knows is the value bash gives (checked against mvdan/sh's own interpreter cases
and against bash itself); every other value is a shell.Unknown, never a guess."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from policies.command import shell
from policies.command.shell import RUN_TIME, UNDEFINED_K8S, UNSET, Script, ShellError, Unknown
from policies.command.torchrun import find_invocation

HERE = Path(__file__).parent
INTERP = yaml.safe_load((HERE / "fixtures" / "shell" / "mvdan-sh-interp-cases.yaml").read_text())


def echoed(script: str, env: dict[str, str] | None = None) -> list[list[str]]:
    """The words of every `echo` the script runs, in order."""
    return [c.argv[1:] for c in Script(script, env or {}, "pod-0").commands() if c.argv[:1] == ["echo"]]


@pytest.mark.parametrize("case", INTERP["cases"], ids=[f"interp_test.go:{c['line']}" for c in INTERP["cases"]])
def test_mvdan_sh_interpreter_cases(case):
    """Ported from mvdan/sh v3.13.1 interp/interp_test.go (the line in the test id): where every word of an echo is
    known, the line it prints is bash's; otherwise the word is an Unknown."""
    lines = echoed(case["script"], INTERP["env"])
    if any(isinstance(w, Unknown) for words in lines for w in words):
        return  # said unknown: no claim
    assert "".join(" ".join(words) + "\n" for words in lines) == case["output"]


def test_most_interpreter_cases_are_known():
    known = sum(all(not isinstance(w, Unknown) for words in echoed(c["script"], INTERP["env"]) for w in words)
                for c in INTERP["cases"])
    assert known >= 60, known  # of 90: the others are arrays, brace expansion, byte strings ... (Unknown)


FAKE = """#!/bin/sh
exec python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@"
"""


@pytest.fixture(scope="module")
def fake_bin(tmp_path_factory):
    """A PATH where `torchrun` prints its argv as JSON and `hostname` prints the pod's hostname."""
    folder = tmp_path_factory.mktemp("bin")
    (folder / "torchrun").write_text(FAKE)
    (folder / "hostname").write_text("#!/bin/sh\necho train-2\n")
    for f in folder.iterdir():
        f.chmod(0o755)
    return folder


SCRIPTS = [
    "torchrun --nnodes=$NNODES --node_rank=${HOSTNAME##*-} --master_addr=\"${MASTER:-train-0}.svc\" t.py",
    "export N=$(( NNODES * 2 )); R=$(hostname); torchrun --nnodes \"$N\" --node-rank=${R#train-} t.py --lr 1e-3",
    "A='a b'; B=\"$A c\"; torchrun $A \"$B\" ${A%% *}x $'t\\tab' t.py",
    "if [ x = y ]; then W=1; else W=1; fi\ncd /tmp && exec env -u X OMP=1 torchrun --nproc_per_node=$W t.py # c",
    "EXTRA='--max-restarts 3 --rdzv-id=job'; torchrun $EXTRA \\\n  --nnodes=${NNODES:-9} ${UNSETVAR:+--x} t.py",
    "f() { torchrun --nnodes=$1 \"$2\"; }\nf 4 'my script.py'",
    "H=${HOSTNAME^^}; L=${#HOSTNAME}; torchrun --a=$H --b=$L --c=${HOSTNAME/train/job} t.py",
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("script", SCRIPTS)
def test_known_words_are_what_bash_passes(script, fake_bin):
    """Run the script in real bash with a fake torchrun: the argv it receives is the one worked out here."""
    env = {"NNODES": "2", "HOSTNAME": "train-2"}
    run_env = {"PATH": f"{fake_bin}:{os.environ['PATH']}", **env}
    out = subprocess.run(["bash", "-c", script], env=run_env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    real = json.loads(out.stdout.strip().splitlines()[-1])
    found = [c for c in Script(script, env, "train-2").commands() if "torchrun" in c.argv]
    argv = found[0].argv
    assert not any(isinstance(w, Unknown) for w in argv), argv
    assert argv[argv.index("torchrun") + 1:] == real


@pytest.mark.parametrize("script,flag,kind", [
    ("N=$(cat /etc/nnodes); torchrun --nnodes=$N t.py", "nnodes", RUN_TIME),
    ("read R < /etc/rank; torchrun --node_rank=$R t.py", "node_rank", RUN_TIME),
    ("for i in 1 2; do N=$i; done; torchrun --nnodes=$N t.py", "nnodes", RUN_TIME),
    ("if [ -f /x ]; then N=2; else N=4; fi; torchrun --nnodes=$N t.py", "nnodes", RUN_TIME),
    ("[ -f /x ] && N=2; torchrun --nnodes=${N:-1} t.py", "nnodes", RUN_TIME),
    ("case $HOSTNAME in *-0) N=1;; esac; torchrun --nnodes=$N t.py", "nnodes", RUN_TIME),
    ("source /etc/env.sh; torchrun --nnodes=$FROM_FILE t.py", "nnodes", RUN_TIME),
    ("torchrun --nnodes=`cat /n` t.py", "nnodes", RUN_TIME),
    ("torchrun --nnodes=$((RANDOM % 2)) t.py", "nnodes", RUN_TIME),
    ("torchrun --nnodes=$NOT_IN_ENV t.py", "nnodes", UNSET),
    ("torchrun --nnodes=$(NNODES) t.py", "nnodes", UNDEFINED_K8S),
])
def test_values_known_only_at_run_time(script, flag, kind):
    inv = find_invocation(["bash", "-c", script], ["command[0]", "command[1]", "command[2]"], {"HOSTNAME": "t-0"})
    s = inv.setting(flag, {}, {})
    assert s.unknown and s.unknown_kind == kind and "$" in s.value, s
    assert s.field == "command[2]"


def test_hostname_is_the_pods():
    inv = find_invocation(["sh", "-c", "torchrun --master_addr=$(hostname).svc --node_rank=${HOSTNAME##*-} t.py"],
                          ["c0", "c1", "c2"], {}, "train-7")
    assert inv.flags["master_addr"][0] == "train-7.svc" and inv.flags["node_rank"][0] == "7"
    # `hostname -f` (the FQDN) and `-i` (the address) depend on the cluster: unknown
    for opt in ("-f", "-i"):
        inv = find_invocation(["sh", "-c", f"torchrun --master_addr=$(hostname {opt}) t.py"], ["c0", "c1", "c2"], {},
                              "train-7")
        assert isinstance(inv.flags["master_addr"][0], Unknown)


def test_controller_variables_resolve_as_the_controller_injects_them():
    """Volcano's svc plugin and LWS inject their variables into the container env (policies/launchers/volcano.py
    host_env, leaderworkerset.py): a script reads them like any other variable."""
    env = {"VC_WORKER_HOSTS": "job-worker-0.job,job-worker-1.job", "VC_WORKER_NUM": "2", "VC_TASK_INDEX": "1",
           "LWS_LEADER_ADDRESS": "lws-0.lws.default", "LWS_GROUP_SIZE": "2"}
    inv = find_invocation(["bash", "-c", "torchrun --nnodes=$VC_WORKER_NUM --node_rank=$VC_TASK_INDEX "
                           "--master_addr=${VC_WORKER_HOSTS%%,*} t.py"], ["c0", "c1", "c2"], env)
    assert {k: v for k, (v, _) in inv.flags.items()} == {"nnodes": "2", "node_rank": "1", "master_addr": "job-worker-0.job"}
    inv = find_invocation(["sh", "-c", "torchrun --nnodes $LWS_GROUP_SIZE --rdzv_endpoint=$LWS_LEADER_ADDRESS:29400 t.py"],
                          ["c0", "c1", "c2"], env)
    assert inv.flags["rdzv_endpoint"][0] == "lws-0.lws.default:29400" and inv.flags["nnodes"][0] == "2"


def test_unknown_words_among_the_options_open_every_default():
    inv = find_invocation(["bash", "-c", "torchrun $(cat /args) --nnodes=2 t.py"], ["c0", "c1", "c2"], {})
    assert inv.setting("nnodes", {}, {}).value == "2"
    s = inv.setting("rdzv_backend", {}, {})
    assert s.unknown_kind == RUN_TIME and s.origin == "default"
    # quoted, the same substitution is one word: the script
    inv = find_invocation(["bash", "-c", "torchrun --nnodes=2 \"$(cat /script)\""], ["c0", "c1", "c2"], {})
    assert inv.open_args is None and isinstance(inv.script, Unknown)


def test_script_exports_reach_the_launcher_and_only_exports():
    inv = find_invocation(["bash", "-c", "export PET_NNODES=3; PET_NPROC_PER_NODE=4; torchrun t.py"],
                          ["c0", "c1", "c2"], {})
    assert inv.setting("nnodes", {}, {}).value == "3" and inv.setting("nnodes", {}, {}).field == "c2"
    assert inv.setting("nproc_per_node", {}, {}).value == "1"  # not exported: torchrun does not see it


def test_unreadable_scripts_are_said_not_guessed():
    with pytest.raises(ShellError, match="does not parse"):
        find_invocation(["sh", "-c", "torchrun \"unterminated"], ["c0", "c1", "c2"], {})
    with pytest.raises(ShellError, match="longer than"):
        find_invocation(["sh", "-c", "#" * (shell.MAX_SCRIPT + 1)], ["c0", "c1", "c2"], {})


def test_no_parser_is_one_error_not_a_crash(monkeypatch):
    monkeypatch.setattr(shell, "shfmt", lambda: None)
    shell.parse.cache_clear()
    try:
        with pytest.raises(ShellError, match="not installed"):
            shell.parse("torchrun t.py # not cached")
    finally:
        shell.parse.cache_clear()


def test_the_parser_runs_within_its_memory_and_its_budget(monkeypatch):
    """Issue 32 item 2: a 240 KB script held shfmt 15 s at 638 MB with no memory limit and no total budget. shfmt
    runs under a data-segment limit (a too-small one makes it fail, so the limit is applied), and once the run's
    parse budget is spent no further script is parsed."""
    script = "\n".join(f'if [ "$X{i}" = "{i}" ]; then echo "${{V_{i}:-d}}"; fi' for i in range(800))
    assert len(script) < shell.MAX_SCRIPT
    shell.parse.cache_clear()
    monkeypatch.setattr(shell, "PARSE_MEMORY_BYTES", 4 * 1024 * 1024)
    with pytest.raises(ShellError, match="could not run|does not parse"):
        shell.parse(script)
    monkeypatch.setattr(shell, "PARSE_MEMORY_BYTES", 512 * 1024 * 1024)
    shell.parse.cache_clear()
    assert shell.parse(script)  # the same script within the real limit
    monkeypatch.setattr(shell, "_spent", [shell.PARSE_BUDGET_S])
    with pytest.raises(ShellError, match="budget for this run"):
        shell.parse(script + "\necho other")
    shell.parse.cache_clear()
