"""Finding torchrun in container command lines and resolving its settings as torchrun does."""
from __future__ import annotations

import pytest

from policies.command.torchrun import find_invocation, parse_argv, split_endpoint, split_nnodes


def inv_of(argv, env=None):
    return find_invocation(argv, [f"f[{i}]" for i in range(len(argv))], env or {})


def test_direct_flags_with_and_without_equals():
    inv = inv_of(["torchrun", "--nnodes", "4", "--nproc_per_node=8", "--standalone", "train.py", "--lr", "1"])
    assert inv.flags["nnodes"][0] == "4" and inv.flags["nproc_per_node"][0] == "8"
    assert inv.flags["standalone"][0] == "true"
    assert inv.script == "train.py" and inv.script_args == ["--lr", "1"]
    assert inv.flags["nnodes"][1] == "f[2]"  # the field of the value


def test_python_module_launchers():
    assert inv_of(["python3", "-u", "-m", "torch.distributed.run", "--nnodes=2", "x.py"]).flags["nnodes"][0] == "2"
    assert inv_of(["python", "-m", "torch.distributed.launch", "x.py"]).script == "x.py"
    assert inv_of(["python", "train.py"]) is None


def test_inside_shell_script_with_env_expansion():
    script = "printenv\nset -e\ntorchrun --nnodes=$NNODES \\\n  --node_rank=${RANK} --master_addr=${ADDR:-fallback} t.py"
    inv = inv_of(["bash", "-xc", script], {"NNODES": "4", "RANK": "2"})
    assert inv.in_shell
    assert inv.flags["nnodes"][0] == "4" and inv.flags["node_rank"][0] == "2"
    assert inv.flags["master_addr"][0] == "fallback"
    assert inv.flags["nnodes"][1] == "f[2]"


@pytest.mark.parametrize("argv", [
    ["sh", "-c", 'exec "$@"', "sh", "torchrun", "--nnodes=3", "--nproc-per-node=2", "t.py", "--lr", "0.1 x"],
    ["bash", "-c", 'set -e; cd /app; "${@}"', "bash", "torchrun", "--nnodes=3", "--nproc-per-node=2", "t.py", "--lr",
     "0.1 x"],
])
def test_the_positional_arguments_a_script_runs_are_the_command(argv):
    """`sh -c 'exec "$@"' sh torchrun ...`: the words after the script are $0, $1 ...; `"$@"` expands to $1 ... one
    field each, unsplit (POSIX 2.5.2), so torchrun is the command and each flag is read where it is written."""
    inv = inv_of(argv)
    assert inv.in_shell and inv.field == "f[4]"
    assert inv.flags["nnodes"] == ("3", "f[5]") and inv.flags["nproc_per_node"][0] == "2"
    assert inv.script_args == ["--lr", "0.1 x"]


def test_a_script_without_its_arguments_runs_nothing_of_them():
    assert inv_of(["sh", "-c", 'exec "$@"']) is None
    assert inv_of(["sh", "-c", 'exec "$@"', "torchrun", "--nnodes=2", "t.py"]) is None  # torchrun is $0, not run


def test_exec_and_env_prefix_and_chains():
    inv = inv_of(["sh", "-c", "cd /app && OMP_NUM_THREADS=1 exec torchrun --nnodes=2 t.py"])
    assert inv.flags["nnodes"][0] == "2"


def test_unknown_variables_stay_visible():
    inv = inv_of(["sh", "-c", "torchrun --nnodes=$MISSING --node-rank=${HOSTNAME##*-} t.py"],
                 {"HOSTNAME": "train-llm-3"})
    assert inv.flags["nnodes"][0] == "$MISSING" and inv.flags["node_rank"][0] == "3"


def test_pet_env_fallback_and_defaults():
    inv = inv_of(["torchrun", "--nnodes=2", "t.py"])
    assert inv.setting("nnodes", {"PET_NNODES": "8"}, {}).value == "2"  # the flag wins
    s = inv.setting("nproc_per_node", {"PET_NPROC_PER_NODE": "4"}, {"PET_NPROC_PER_NODE": "env[0]"})
    assert (s.value, s.origin, s.field) == ("4", "env", "env[0]")
    assert inv.setting("rdzv_backend", {}, {}).value == "static"
    assert inv.setting("master_addr", {}, {}).value == "127.0.0.1"


def test_split_helpers():
    assert split_nnodes("4") == (4, 4) and split_nnodes("1:4") == (1, 4) and split_nnodes("$(N)") == (None, None)
    assert split_endpoint("host:29500") == ("host", "29500")
    assert split_endpoint("host") == ("host", "29400")
    assert split_endpoint("[::1]:1234") == ("::1", "1234")


@pytest.mark.parametrize("line,rank", [
    ("torchrun --node-rank=${HOSTNAME##*-} train.py # start", "3"),
    ("torchrun --node-rank=a#b train.py '# not a comment' \"#x\"", "a#b"),
    ("x=1;# after a separator\ntorchrun --node-rank=$x t.py", "1"),
])
def test_a_hash_starts_a_comment_only_at_the_start_of_a_word(line, rank):
    inv = inv_of(["sh", "-c", line], {"HOSTNAME": "ddp-3"})
    assert inv.flags["node_rank"][0] == rank


def test_shell_variables_the_script_sets_are_expanded():
    script = "RANK=${HOSTNAME##*-}\nexport NN=4\nexec torchrun --nnodes=$NN --node-rank $RANK train.py # static"
    inv = find_invocation(["sh", "-c", script], ["c0", "c1", "c2"], {"HOSTNAME": "ddp-3"})
    assert inv.flags["node_rank"][0] == "3" and inv.flags["nnodes"][0] == "4" and inv.script == "train.py"


def test_accelerate_launch_maps_to_torchrun_settings():
    argv = ["accelerate", "launch", "--multi_gpu", "--num_machines", "2", "--num_processes=16", "--machine_rank", "1",
            "--main_process_ip", "head", "--main_process_port", "29500", "train.py", "--lr", "1"]
    inv = parse_argv(argv, [f"f{i}" for i in range(len(argv))])
    assert inv.launcher == "accelerate launch" and not inv.reads_pet_env
    assert {k: v for k, (v, _) in inv.flags.items()} == {
        "nnodes": "2", "node_rank": "1", "master_addr": "head", "master_port": "29500", "nproc_per_node": "8"}
    assert inv.script == "train.py" and inv.script_args == ["--lr", "1"]
    # accelerate reads no PET_* env: the operator's PET_NNODES does not reach it
    assert inv.setting("rdzv_id", {"PET_RDZV_ID": "x"}, {}).origin == "default"
    assert inv.flag("nnodes") == "--num_machines"
    assert parse_argv(["python", "-m", "accelerate.commands.launch", "t.py"], ["a", "b", "c", "d"]).script == "t.py"


def test_the_options_are_the_installed_torchruns():
    """policies/command/torchrun.py OPTIONS is torch's own parser's option list (the pinned torch of requirements-dev.txt)."""
    from torch.distributed.run import get_args_parser

    from policies.command.torchrun import OPTIONS, unknown_option

    assert OPTIONS == {s for a in get_args_parser()._actions for s in a.option_strings}
    assert unknown_option("nprocs_per_node") and not unknown_option("nproc_per_node") and not unknown_option("nnode")


def test_torch_distributed_launch_takes_use_env_and_no_value_with_it():
    """`--use_env` is torch.distributed.launch's own switch (launch.py parse_args): it takes no value, so the option
    after it is read, and torchrun proper (`-m torch.distributed.run`) does not take it."""
    argv = ["python", "-m", "torch.distributed.launch", "--use_env", "--nproc_per_node=2", "train.py"]
    inv = parse_argv(argv, [f"c[{i}]" for i in range(len(argv))])
    assert inv is not None and inv.flags["nproc_per_node"][0] == "2" and inv.script == "train.py"
    assert inv.own_options == {"use_env"}
    argv[2] = "torch.distributed.run"
    assert parse_argv(argv, [f"c[{i}]" for i in range(len(argv))]).own_options == frozenset()
