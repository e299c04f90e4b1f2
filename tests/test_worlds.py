"""Worlds not started by torchrun: the ImageNet example's own --dist-url flags, mpirun, deepspeed and accelerate launch,
mapped onto the settings torchrun's are checked by (policies/command/torchrun.py), and what each leaves unstated said once."""
from __future__ import annotations

from pathlib import Path

import pytest

from policies.command.torchrun import DIST_URL, find_invocation, parse_argv

from conftest import FIXTURES
from test_rules import _write, problems_of

RULES = FIXTURES / "rules"


def fields(argv):
    return [f"f{i}" for i in range(len(argv))]


# --- the PyTorch ImageNet example (pytorch/examples imagenet/main.py) -------------------------------------------

IMAGENET = ["python", "main.py", "-a", "resnet50", "--dist-url", "tcp://ddp-0.ddp:23456", "--dist-backend", "nccl",
            "--multiprocessing-distributed", "--world-size", "2", "--rank", "1", "/data/imagenet"]


def test_imagenet_flags_map_onto_the_world():
    inv = parse_argv(IMAGENET, fields(IMAGENET))
    assert inv.launcher == DIST_URL and not inv.reads_pet_env and not inv.elastic_agent
    assert {k: v for k, (v, _) in inv.flags.items()} == {
        "nnodes": "2", "node_rank": "1", "master_addr": "ddp-0.ddp", "master_port": "23456", "rdzv_backend": "static",
        "nproc_per_node": "auto"}  # one process per visible GPU (imagenet/main.py line 119)
    assert inv.flags["nnodes"][1] == "f10" and inv.flags["master_addr"][1] == "f5"
    assert inv.flag("nnodes") == "--world-size" and inv.flag("node_rank") == "--rank"
    assert inv.script == "main.py"


def test_imagenet_without_multiprocessing_is_one_process_per_pod():
    argv = [a for a in IMAGENET if a != "--multiprocessing-distributed"]
    assert parse_argv(argv, fields(argv)).flags["nproc_per_node"][0] == "1"


def test_imagenet_env_url_reads_the_env_and_minus_one_is_unset():
    argv = ["python3", "-u", "main.py", "--dist-url=env://", "--world-size=-1", "/data"]
    inv = parse_argv(argv, fields(argv))
    assert "nnodes" not in inv.flags and "master_addr" not in inv.flags
    env = {"WORLD_SIZE": "4", "RANK": "2", "MASTER_ADDR": "m", "MASTER_PORT": "1"}
    assert inv.setting("nnodes", env, {"WORLD_SIZE": "e0"}).value == "4"
    assert inv.setting("node_rank", env, {}).value == "2" and inv.setting("master_addr", env, {}).origin == "env"
    assert inv.setting("nnodes", {}, {}).origin == "default"  # unstated: TOPO012 says so


@pytest.mark.parametrize("argv", [
    ["python", "train.py", "--lr", "1"],  # no --dist-url: a plain script (env:// or nothing)
    ["python", "-c", "import x --dist-url", "--dist-url", "tcp://a:1"],  # code, not a script
    ["python", "-m", "mod", "--dist-url", "tcp://a:1"],
])
def test_not_the_imagenet_shape(argv):
    assert parse_argv(argv, fields(argv)) is None


def test_imagenet_in_a_shell_script():
    script = "cd /work && exec python main.py --dist-url tcp://job-0.job:23456 --world-size 2 --rank $RANK /data"
    inv = find_invocation(["bash", "-c", script], ["c0", "c1", "c2"], {"RANK": "1"})
    assert inv.launcher == DIST_URL and inv.flags["node_rank"][0] == "1" and inv.in_shell


def _rules(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for p in problems_of(path):
        found.setdefault(p.rule, []).append(p.severity)
    return found


def test_imagenet_unstated_world_is_one_info_line_and_no_error():
    problems = problems_of(RULES / "TOPO012" / "fail" / "unstated-dist-url-world-size.yaml")
    said = [p for p in problems if p.rule == "TOPO012"]
    assert len(said) == 1 and said[0].severity == "info" and "--world-size" in said[0].message
    assert not [p for p in problems if p.severity == "error"]


# --- mpirun (kubeflow/mpi-operator MPIJob; Open MPI mpirun(1)) -----------------------------------------------------

def test_mpirun_reads_hosts_hostfile_and_exports():
    from policies.launchers.mpijob import find_mpirun

    argv = ["mpirun", "--allow-run-as-root", "-np", "4", "-bind-to", "none", "-mca", "pml", "ob1", "-H",
            "a.j:2,b.j", "--host=c.j:1", "-x", "MASTER_ADDR=a.j", "-x", "NCCL_DEBUG", "python", "train.py"]
    run = find_mpirun(argv, fields(argv))
    assert run.np == 4 and run.hosts == [("a.j", 2), ("b.j", 1), ("c.j", 1)]
    assert run.exported == {"MASTER_ADDR": "a.j", "NCCL_DEBUG": None}
    assert run.program == ["python", "train.py"]  # the option values (none, pml ob1) are not taken for it
    run = find_mpirun(["mpirun", "--hostfile", "/tmp/h", "-np", "2", "python", "t.py"], fields("abcdefg"))
    assert run.hostfile == "/tmp/h" and run.np == 2


def test_mpirun_in_a_script_is_read_as_the_shell_reads_it():
    """A launcher's `bash -c` script is parsed (mvdan/sh, policies/command/shell.py), not split at white space:
    a backslash-newline continues the mpirun line (OCI's nccl-tests MPIJobs write one option per line, and the
    program was taken to be `\\ -mca`), quotes keep `"-p 2222"` one value, the container's env gives `-np $N`,
    and an -np computed at run time is unknown rather than the slots' count."""
    from policies.launchers.mpijob import find_mpirun
    from policies.launchers.mpirun import ranks_over_hosts

    script = ('NP=$(($(wc -l < /etc/mpi/hostfile)*8))\nwhile ! ssh -p 2222 w-0 true; do sleep 5; done\n'
              'mpirun --allow-run-as-root \\\n  -mca plm_rsh_args "-p 2222" --hostfile /etc/mpi/hostfile \\\n'
              '  -np $NP -x NCCL_DEBUG=WARN \\\n  /opt/nccl-tests/all_reduce_perf -b 8 -e 4G\n')
    argv = ["bash", "-c", script]
    run = find_mpirun(argv, ["c0", "a0", "a1"])
    assert run.program == ["/opt/nccl-tests/all_reduce_perf", "-b", "8", "-e", "4G"]
    assert run.hostfile == "/etc/mpi/hostfile" and run.exported == {"NCCL_DEBUG": "WARN"} and run.field == "a1"
    assert run.np is None and run.np_text.startswith("$((") and ranks_over_hosts(run, 8, 2) == (None, 2)
    known = find_mpirun(["sh", "-c", "mpirun -np $N \\\n python t.py"], ["c0", "a0", "a1"], {"N": "16"})
    assert known.np == 16 and known.np_text is None and known.program == ["python", "t.py"]
    unread = find_mpirun(["sh", "-c", "mpirun -np 4 \\\n python t.py; if"], ["c0", "a0", "a1"])  # no parse
    assert unread.np == 4 and unread.program[0] == "python"  # white space, without the continuation's backslash


def test_mpirun_hosts_known_only_at_run_time_stay_one_word():
    """Volcano's kubecon MPI sample runs `mpiexec --host ${MPI_HOST}` with MPI_HOST=`cat .../mpiworker.host | tr "\\n"
    ","`: -H is split at its own commas, not at the comma inside the command substitution, so the info line quotes
    the whole value (it quoted `$(cat ... | tr "\\n" "`, cut at that comma)."""
    from policies.launchers.mpirun import find_mpirun

    run = find_mpirun(["sh", "-c", 'mpirun -H $(cat /h | tr "\\n" ","),b.j:2 -np 2 t'], ["c0", "a0", "a1"])
    assert run.hosts == [('$(cat /h | tr "\\n" ",")', 1), ("b.j", 2)]
    run = find_mpirun(["mpirun", "-H", "${HOSTS:-a.j,c.j},b.j:2", "-np", "2", "t"], ["f"] * 6)
    assert run.hosts == [("${HOSTS:-a.j,c.j}", 1), ("b.j", 2)]
    found = [p for p in problems_of(FIXTURES.parent / "corpus/volcano/volcano-kubecon-mpi-sample.yaml")
             if p.rule == "TOPO012"]
    assert len(found) == 1, found
    assert '($(cat /etc/volcano/mpiworker.host | tr "\\n" ",")) are known only when it runs' in found[0].message


@pytest.mark.parametrize("fixture,found", [
    ("fail/mpijob-master-addr-not-rank-0.yaml", "rank 0 (the first slot mpirun fills) runs on ddp-worker-0"),
    ("fail/mpijob-hosts-beyond-workers.yaml", "-H lists 2 slots"),
])
def test_mpirun_world_checked(fixture, found):
    problems = [p for p in problems_of(RULES / "TOPO011" / fixture) if p.rule == "TOPO011"]
    assert any(found in p.message and p.severity == "error" for p in problems), [p.line() for p in problems]


@pytest.mark.parametrize("fixture, python", [
    ("mpijob-master-addr-not-rank-0.yaml", '"python", "/app/train.py"'),
    ("trainjob-mpi-master-addr-not-rank-0.yaml", "python, /app/train.py"),
])
@pytest.mark.parametrize("program", [["python3", "/usr/local/bin/torchrun", "--nproc-per-node", "1", "/app/train.py"],
                                     ["bash", "-c", "cd /app; exec python -m torch.distributed.run --nproc-per-node 1 "
                                                    "train.py"],
                                     ["bash", "-c", "cd /app; exec python -m torch.distributed.launch --use-env "
                                                    "train.py"]],
                         ids=["python3-torchrun", "bash-c-torch.distributed.run", "bash-c-torch.distributed.launch"])
def test_mpirun_starting_torchrun_unread_claims_no_rank_zero_address(fixture, python, program, tmp_path):
    """The same worlds with mpirun starting torchrun where torchrun_under cannot read it (through python3, or after
    `cd /app;`): torchrun sets its workers' MASTER_ADDR from its own --master-addr (torch 2.13:
    local_elastic_agent.py 424, run.py 629-633), so mpirun's `-x MASTER_ADDR` names no store and is not an error.
    The MPIJob path claimed one for each; the TrainJob path for `torch.distributed.run` and `.launch`
    (launch.py runs torchrun's agent: its main calls run.run, torch 2.13 launch.py 165-188)."""
    text = (RULES / "TOPO011" / "fail" / fixture).read_text()
    assert python in text
    assert [p for p in problems_of(_write(tmp_path, text)) if "first slot mpirun fills" in p.message]
    words = ", ".join(f'"{w}"' for w in program)
    problems = problems_of(_write(tmp_path, text.replace(python, words)))
    assert not [p for p in problems if "first slot mpirun fills" in p.message], [p.line() for p in problems]
    assert not [p for p in problems if p.severity == "error"], [p.line() for p in problems]


def test_mpirun_says_once_what_it_did_not_check():
    """An MPIJob running mpirun: one TOPO012 info line names mpirun, its ranks and what was left unchecked."""
    problems = problems_of(RULES / "TOPO011" / "pass" / "mpijob-mpirun-python.yaml")
    said = [p for p in problems if p.rule == "TOPO012"]
    assert len(said) == 1 and said[0].severity == "info" and said[0].message.startswith("mpirun starts -np 2 ranks")
    assert "OMPI_COMM_WORLD_RANK" in said[0].message
    assert not [p for p in problems if p.severity == "error"]


def test_hostfile_line_without_slots_has_the_nodes_cores(tmp_path):
    """A hostfile line without slots= gives the host its node's processor cores (Open MPI's "not enough slots" help
    text: "N defaults to number of processor cores if not provided"; `-H host` alone is 1): -np 4 over two such
    hosts is no error, and one TOPO012 info line says -np was not checked. With slots=1 it stays refused."""
    text = (RULES / "TOPO011" / "fail" / "indexed-job-mpirun-hostfile-np-above-slots.yaml").read_text()
    assert [p for p in problems_of(_write(tmp_path, text)) if "not enough slots" in p.message]
    problems = problems_of(_write(tmp_path, text.replace(" slots=1\n", "\n")))
    assert not [p for p in problems if p.severity == "error"], [p.line() for p in problems]
    [said] = [p for p in problems if p.rule == "TOPO012"]
    assert said.severity == "info" and "gives ddp-0.ddp and others no slots=" in said.message
    assert "-np 4 was not checked" in said.message and "slots=N" in said.hint


def test_mpijob_without_workers_runs_its_ranks_in_the_launcher(tmp_path):
    """An MPIJob with no Worker (Kueue's workload-priority KEP example): the hostfile names no host, and Open MPI
    then takes the local node (ras_base_allocate.c's "inserting current node"): the launcher pod runs every rank. A
    warning that nothing is distributed, not "the hostfile has 0 slots" nor "creates no pods" (the launcher is a pod)."""
    text = (RULES / "TOPO011" / "pass" / "mpijob-mpirun-python.yaml").read_text()
    problems = problems_of(_write(tmp_path, text[:text.index("    Worker:")]))
    assert not [p for p in problems if p.severity == "error"], [p.line() for p in problems]
    [said] = [p for p in problems if p.rule == "TOPO011"]
    assert said.severity == "warning" and "Open MPI runs all 2 ranks in the launcher pod" in said.message
    assert not [p for p in problems if "creates no pods" in p.message]


# --- deepspeed (deepspeed/launcher/runner.py) ---------------------------------------------------------------------

def test_deepspeed_no_ssh_maps_onto_the_world():
    argv = ["deepspeed", "--no_ssh", "--num_nodes", "2", "--num_gpus=8", "--node_rank", "1", "--master_addr",
            "job-0.job", "-H", "/etc/ds/hostfile", "train.py", "--deepspeed_config", "ds.json"]
    inv = parse_argv(argv, fields(argv))
    assert inv.launcher == "deepspeed" and not inv.elastic_agent and inv.not_modelled is None
    assert {k: v for k, (v, _) in inv.flags.items()} == {
        "nnodes": "2", "nproc_per_node": "8", "node_rank": "1", "master_addr": "job-0.job",
        "master_port": "29500", "rdzv_backend": "static"}  # runner.py's default port, deepspeed/constants.py
    assert inv.script == "train.py" and inv.script_args == ["--deepspeed_config", "ds.json"]
    assert inv.flag("nproc_per_node") == "--num_gpus"
    argv = ["python", "-m", "deepspeed.launcher.runner", "--no_ssh", "t.py"]
    assert parse_argv(argv, fields(argv)).script == "t.py"


def test_deepspeed_over_ssh_is_not_modelled():
    argv = ["deepspeed", "--hostfile=/job/hosts", "--num_gpus", "8", "train.py"]
    inv = parse_argv(argv, fields(argv))
    assert inv.not_modelled and "/job/hosts" in inv.not_modelled


# --- accelerate launch (accelerate/commands/launch.py) --------------------------------------------------------------

def test_accelerate_without_config_file_requires_the_world_on_the_command_line():
    argv = ["accelerate", "launch", "--machine_rank", "0", "train.py"]
    inv = parse_argv(argv, fields(argv))
    assert inv.required == ("nnodes", "master_addr")
    assert inv.flags["nproc_per_node"][0] == "auto"  # the GPU count (launch.py lines 1306-1323)
    argv = ["accelerate", "launch", "--config_file", "/etc/a.yaml", "train.py"]
    assert parse_argv(argv, fields(argv)).required == ()  # the file, read or said unread (UnreadConfig)


@pytest.mark.parametrize("fixture,rule,severity", [
    ("TOPO001/fail/deepspeed-num-nodes-3.yaml", "TOPO001", "error"),
    ("TOPO003/fail/deepspeed-master-addr-localhost.yaml", "TOPO003", "error"),
    ("TOPO002/fail/accelerate-multi-gpu-one-process.yaml", "TOPO002", "error"),
    ("TOPO012/fail/unstated-deepspeed-over-ssh.yaml", "TOPO012", "info"),
    ("TOPO012/fail/unstated-accelerate-no-num-machines.yaml", "TOPO012", "info"),
])
def test_launcher_fixtures(fixture, rule, severity):
    problems = problems_of(RULES / fixture)
    said = [p for p in problems if p.rule == rule]
    assert len(said) == 1 and said[0].severity == severity, [p.line() for p in said]
    if severity == "info":  # what is not shown is said once, never an error
        assert not [p for p in problems if p.severity == "error"]


@pytest.mark.parametrize("fixture,launch,agent", [
    ("TOPO001/pass/imagenet-dist-url.yaml", DIST_URL, False),
    ("TOPO001/pass/deepspeed-no-ssh.yaml", "deepspeed", False),
])
def test_plan_names_the_program_that_starts_the_world(fixture, launch, agent):
    """make plan FORMAT=json: `torchrun` says a launcher was found; `launch` names it and `elastic_agent` says whether
    torch's agent runs the workers (what TOPO008, RDZV003 and RESTART001 assume)."""
    import json

    from conftest import run_cli
    proc = run_cli("plan", "--format", "json", str(RULES / fixture))
    assert proc.returncode == 0, proc.stderr
    [topology] = [w["topology"] for o in json.loads(proc.stdout)["overlays"] for w in o["workloads"] if w["topology"]]
    assert topology["torchrun"] is True and topology["launch"] == launch and topology["elastic_agent"] is agent
