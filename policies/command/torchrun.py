"""Find a torchrun invocation in a container's command line (direct, `python -m torch.distributed.run`, or inside
a `sh -c` script) and work out each torchrun setting the way torchrun does: flag, else `PET_<NAME>` env, else default."""
from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass, field
from typing import Any

from . import shell, shellwords

# torchrun's own defaults (torch/distributed/run.py, torch 2.13).
DEFAULTS = {
    "nnodes": "1:1",
    "nproc_per_node": "1",
    "rdzv_backend": "static",
    "rdzv_endpoint": "",
    "rdzv_id": "none",
    "rdzv_conf": "",
    "node_rank": "0",
    "master_addr": "127.0.0.1",
    "master_port": "29500",
    "max_restarts": "0",
    "standalone": "",
}
# Every option torchrun's parser takes (torch/distributed/run.py get_args_parser, torch 2.13; tests/test_torchrun.py
# holds this to the installed torch's). argparse also takes a unique prefix of one (allow_abbrev); anything else ends
# torchrun with "unrecognized arguments", exit 2, before any worker starts.
OPTIONS = frozenset({
    "--duplicate-stderr-filters", "--duplicate-stdout-filters", "--duplicate_stderr_filters",
    "--duplicate_stdout_filters", "--event-log-handler", "--event_log_handler", "--help", "--local-addr",
    "--local-ranks-filter", "--local_addr", "--local_ranks_filter", "--log-dir", "--log_dir", "--logs-specs",
    "--logs_specs", "--master-addr", "--master-port", "--master_addr", "--master_port", "--max-restarts",
    "--max_restarts", "--module", "--monitor-interval", "--monitor_interval", "--nnodes", "--no-python",
    "--no_python", "--node-rank", "--node_rank", "--nproc-per-node", "--nproc_per_node", "--numa-binding",
    "--numa_binding", "--rdzv-backend", "--rdzv-conf", "--rdzv-endpoint", "--rdzv-id", "--rdzv_backend",
    "--rdzv_conf", "--rdzv_endpoint", "--rdzv_id", "--redirects", "--role", "--run-path", "--run_path",
    "--shutdown-timeout", "--shutdown_timeout", "--signals-to-handle", "--signals_to_handle", "--standalone",
    "--start-method", "--start_method", "--tee", "--virtual-local-rank", "--virtual_local_rank", "-h", "-m", "-r",
    "-t",
})


@functools.lru_cache(maxsize=4096)
def unknown_option(dest: str) -> bool:
    """Whether torchrun's parser refuses an option parsed as `dest` (written with - or _): neither an option nor a
    prefix of one. (A prefix of several is ambiguous on some Pythons only: not claimed.) Asked once per option
    written: every option is compared with each of torchrun's."""
    if len(dest) > 1 and f"-{dest[0]}" in OPTIONS and not dest[1:2].isalpha():
        return False  # `-r0`, `-t3`: a short option with its value attached
    spelled = {f"--{dest}", f"--{dest.replace('_', '-')}"} if len(dest) > 1 else {f"-{dest}", f"--{dest}"}
    return not any(o == w or o.startswith(w) for o in OPTIONS for w in spelled if w.startswith("--") or o == w)


# torchrun flags that take no value; every other option takes one.
_BOOLEAN = {"standalone", "module", "m", "no_python", "run_path", "virtual_local_rank"}
_LAUNCHER_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
# The deprecated torch.distributed.launch adds one flag of its own to torchrun's (launch.py parse_args, torch 2.13).
_LAUNCH_ONLY = {"use_env"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ash"}


@dataclass
class Setting:
    """One torchrun setting: its value and where it came from (`flag`, `env`, `default`) with the field path."""

    value: str
    origin: str
    field: str | None = None
    # The env variable a flag was written through (`--nnodes=$(NNODES)` -> NNODES), if any.
    var: str | None = None
    # Why the value is known only when the container runs (a shell script's `$(...)`, `read`, a loop), and how
    # (shell.RUN_TIME, shell.UNSET, shell.UNDEFINED_K8S); None for a value the manifest shows.
    unknown: str | None = None
    unknown_kind: str | None = None


def _setting(value: str, origin: str, where: str | None) -> Setting:
    if isinstance(value, shellwords.Unknown):
        return Setting(value, origin, where, unknown=value.why, unknown_kind=value.kind)
    return Setting(value, origin, where)


@dataclass
class Invocation:
    """A torchrun command line found in a container: its flags (dest -> (raw value, field path)) and the script."""

    flags: dict[str, tuple[str, str]] = field(default_factory=dict)
    script: str | None = None
    script_args: list[str] = field(default_factory=list)
    field: str = ""
    in_shell: bool = False
    # The command that launches the workers: torchrun (also `python -m torch.distributed.run`) or
    # `accelerate launch`, whose flags are mapped onto torchrun's settings and which reads no PET_* env.
    launcher: str = "torchrun"
    reads_pet_env: bool = True
    # The flag as the launcher spells it, by torchrun setting (accelerate's --num_machines for nnodes).
    spelled: dict[str, str] = dataclasses.field(default_factory=dict)
    # accelerate launch: its own options as written (dest -> (value, field)), and its --config_file, if any.
    accelerate: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    accelerate_config: tuple[str, str] | None = None
    # The config file the launcher reads, where no ConfigMap or Secret in the manifests gives its text.
    unread_config: str | None = None
    # Inside a shell script: the variables exported to the launcher (name -> value or shell.Unknown), where the
    # launcher runs (`within` an if, a loop ...; "" at the top) and what may have set any variable before it.
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    within: str = ""
    tainted: str | None = None
    # An unquoted word among the launcher's options whose words only the running shell knows (`torchrun $ARGS`):
    # the word, and why; every setting no flag gives may come from it.
    open_args: str | None = None
    # The env variable a launcher other than torchrun reads a setting from where no flag gives it (the ImageNet
    # example's `--dist-url env://` reads WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT), by torchrun setting.
    env_names: dict[str, str] = dataclasses.field(default_factory=dict)
    # Whether the launcher is torch's elastic agent (torchrun, `accelerate launch`): it sets WORLD_SIZE, RANK ... for
    # its workers, exits 1 on SIGTERM and reads --rdzv-conf; a script that starts its own processes does none of that.
    elastic_agent: bool = True
    # The settings the world cannot be checked without, by name (nnodes, node_rank, master_addr ...): where one is
    # neither written nor in the env, the launcher's own default is not known here and the world is not checked.
    required: tuple[str, ...] = ()
    # Why, on several pods, the world this launcher forms is not worked out here at all (deepspeed without --no_ssh
    # starts every node over ssh from a hostfile); None where it is.
    not_modelled: str | None = None
    own_options: frozenset[str] = frozenset()  # options this launcher takes besides torchrun's (`--use-env`)

    def flag(self, name: str) -> str:
        return self.spelled.get(name, "--" + name.replace("_", "-"))

    def setting(self, name: str, env: dict[str, str | None], env_fields: dict[str, str]) -> Setting:
        """Resolve one setting as torchrun does: command-line flag, then `PET_<NAME>` env, then torchrun's default."""
        if name in self.flags:
            value, where = self.flags[name]
            return _setting(value, "flag", where)
        if self.open_args is not None:
            return _setting(self.open_args, "default", None)
        var = self.env_names.get(name)
        if var is not None:
            own = self.env.get(var)
            if own is not None and own is not env.get(var):  # set by the script itself
                return _setting(own, "env", self.field)
            if env.get(var) is not None:
                return Setting(str(env[var]), "env", env_fields.get(var))
        pet = "PET_" + name.upper()
        if self.reads_pet_env:
            own = self.env.get(pet)
            if own is not None and own is not env.get(pet):  # set by the script itself
                return _setting(own, "env", self.field)
            if env.get(pet) is not None:
                return Setting(str(env[pet]), "env", env_fields.get(pet))
        return Setting(DEFAULTS.get(name, ""), "default", None)


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def parse_argv(argv: list[str], fields: list[str]) -> Invocation | None:
    """Parse `torchrun ...` (argv[0] is torchrun or python with -m torch.distributed.run) or `accelerate launch
    ...`; None if it is neither."""
    if not argv:
        return None
    head = argv[0].rsplit("/", 1)[-1]
    i, own = 1, frozenset[str]()
    if head in ("torchrun", "torchrun.exe"):
        pass
    elif head == "accelerate" and len(argv) > 1 and argv[1] == "launch":
        return parse_accelerate(argv, fields, 2)
    elif head == "deepspeed":
        return parse_deepspeed(argv, fields, 1)
    elif head.startswith("python"):
        # python [-u ...] -m torch.distributed.run ...
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "-m":
            i += 1
        if i + 1 < len(argv) and argv[i] == "-m" and argv[i + 1] in _ACCELERATE_MODULES:
            return parse_accelerate(argv, fields, i + 2)
        if i + 1 < len(argv) and argv[i] == "-m" and argv[i + 1] in _DEEPSPEED_MODULES:
            return parse_deepspeed(argv, fields, i + 2)
        if i + 1 < len(argv) and argv[i] == "-m" and argv[i + 1] in _LAUNCHER_MODULES:
            own = frozenset(_LAUNCH_ONLY if argv[i + 1] == "torch.distributed.launch" else ())
            i += 2
        elif i < len(argv) and not argv[i].startswith("-"):
            return parse_dist_url(argv, fields, i)
        else:
            return None
    else:
        return None
    inv = Invocation(field=fields[0] if fields else "", own_options=own)
    inv.flags, i, inv.open_args = _options(argv, fields, i, _BOOLEAN | own)
    inv.script, inv.script_args = (argv[i], argv[i + 1:]) if i < len(argv) else (None, [])
    return inv


def _options(argv: list[str], fields: list[str], i: int,
             booleans: set[str]) -> tuple[dict[str, tuple[str, str]], int, str | None]:
    """A launcher's options from argv[i] on, up to its script (or `--`): dest -> (value, field path of the value);
    `booleans` take no value. Returns them, the index of the script and, where an unquoted word among them is known
    only at run time (`$ARGS`: any number of options), that word as a shell.Unknown."""
    flags: dict[str, tuple[str, str]] = {}
    open_args: str | None = None
    while i < len(argv):
        tok = argv[i]
        if isinstance(tok, shellwords.Unknown) and tok.many and not tok.startswith("-"):
            open_args = open_args or shellwords.Unknown(tok, f"`{tok}` may give any option at run time ({tok.why})",
                                                   tok.kind)
            i += 1
            continue
        if tok == "--":
            i += 1
            break
        if not tok.startswith("-") or tok == "-":
            break
        if "=" in tok:
            name, value = tok.split("=", 1)
            if isinstance(tok, shellwords.Unknown):
                value = shellwords.Unknown(value, tok.why, tok.kind)
            flags[_dest(name)] = (value, fields[i])
            i += 1
            continue
        dest = _dest(tok)
        if dest in booleans:
            flags[dest] = ("true", fields[i])
            i += 1
            continue
        flags[dest] = (argv[i + 1] if i + 1 < len(argv) else "", fields[i + 1] if i + 1 < len(argv) else fields[i])
        i += 2
    return flags, i, open_args


# accelerate launch (accelerate/commands/launch.py): options that take no value; every other option takes one.
_ACCELERATE_BOOLEAN = {"cpu", "multi_gpu", "tpu", "ipex", "use_xpu", "use_deepspeed", "use_fsdp", "use_megatron_lm",
                       "same_network", "debug", "quiet", "q", "module", "m", "no_python", "tpu_use_cluster",
                       "tpu_use_sudo", "enable_cpu_affinity"}
_ACCELERATE_MODULES = {"accelerate.commands.launch"}
# accelerate's flag -> the torchrun setting it becomes (multi_gpu_launcher / prepare_multi_gpu_env).
_ACCELERATE_FLAGS = {"num_machines": "nnodes", "machine_rank": "node_rank", "main_process_ip": "master_addr",
                     "main_process_port": "master_port", "rdzv_backend": "rdzv_backend", "max_restarts": "max_restarts"}


def parse_accelerate(argv: list[str], fields: list[str], i: int) -> Invocation:
    """`accelerate launch [options] script.py ...`: accelerate starts torch's elastic launcher with
    `--nnodes num_machines --node_rank machine_rank --nproc_per_node num_processes/num_machines
    --master_addr main_process_ip --master_port main_process_port` (static rendezvous by default); it reads its own
    flags and config file, not PET_* env. `--config_file` is kept (`accelerate_config`): its values fill what the
    command line leaves out once the file's text is known (`with_accelerate_config`)."""
    inv = Invocation(field=fields[0] if fields else "", launcher="accelerate launch", reads_pet_env=False)
    raw, i, inv.open_args = _options(argv, fields, i, _ACCELERATE_BOOLEAN)
    inv.accelerate = raw
    if "config_file" in raw:
        inv.accelerate_config = raw["config_file"]
    _accelerate_settings(inv, raw)
    if inv.accelerate_config is None:
        # Without --config_file accelerate still reads its default config file where the image has one
        # (commands/launch.py _validate_launch_command, at commit 16cb6eb8 line 1212); without that, num_processes
        # is the GPU count (lines 1306-1323) and num_machines 1 (1341-1343). What the command leaves out is not known.
        inv.required = ("nnodes", "nproc_per_node", "master_addr")
        if "nproc_per_node" not in inv.flags:
            inv.flags["nproc_per_node"] = ("auto", inv.field)
            inv.required = ("nnodes", "master_addr")
    inv.script, inv.script_args = (argv[i], argv[i + 1:]) if i < len(argv) else (None, [])
    return inv


def _accelerate_settings(inv: Invocation, raw: dict[str, tuple[str, str]]) -> None:
    for flag, dest in _ACCELERATE_FLAGS.items():
        inv.spelled[dest] = f"--{flag}"
        if flag in raw:
            inv.flags[dest] = raw[flag]
        else:
            inv.flags.pop(dest, None)
    inv.spelled["nproc_per_node"] = "--num_processes / --num_machines"
    inv.flags.pop("nproc_per_node", None)
    if "num_processes" in raw:
        total, where = raw["num_processes"]
        machines = raw.get("num_machines", ("1", where))[0]
        if total.isdigit() and machines.isdigit() and int(machines) > 0:
            inv.flags["nproc_per_node"] = (str(int(total) // int(machines)), where)
        else:
            inv.flags["nproc_per_node"] = (f"{total}/{machines}", where)


# What `accelerate launch` takes from a config file (accelerate commands/launch.py _validate_launch_command, at
# commit 00785cd9: for a LOCAL_MACHINE config every key but compute_environment, mixed_precision and
# distributed_type fills an argument the command line left unset): the ones that shape the world.
ACCELERATE_CONFIG_KEYS = (*_ACCELERATE_FLAGS, "num_processes")


def with_accelerate_config(inv: Invocation, config: Any, where: str) -> None:
    """Fill the settings the command line leaves out from the text of accelerate's config file (a mapping), the
    command line winning; `where` is the field each such setting points at."""
    if not isinstance(config, dict) or config.get("compute_environment", "LOCAL_MACHINE") != "LOCAL_MACHINE":
        return
    from_file = {k: (str(config[k]), where) for k in ACCELERATE_CONFIG_KEYS
                 if config.get(k) is not None and not isinstance(config[k], (dict, list, bool))}
    taken = set(from_file) - set(inv.accelerate)
    _accelerate_settings(inv, {**from_file, **inv.accelerate})  # the command line wins
    # Where a setting comes from the file, a message names the file's key (`num_machines in /etc/a.yaml`).
    path = inv.accelerate_config[0] if inv.accelerate_config else "the config file"
    for key in taken:
        dest = _ACCELERATE_FLAGS.get(key)
        if dest is not None:
            inv.spelled[dest] = f"{key} in {path}"
    if "num_processes" in taken or "num_machines" in taken:
        inv.spelled["nproc_per_node"] = f"num_processes / num_machines (from {path})"


# The deepspeed launcher (deepspeed/launcher/runner.py at deepspeedai/DeepSpeed commit edaa7221, parse_args lines
# 48-227, main lines 436-560): options that take no value (the store_true ones); every other takes one.
_DEEPSPEED_BOOLEAN = {"module", "no_python", "no_local_rank", "no_ssh", "no_ssh_check", "force_multi", "save_pid",
                      "elastic_training", "bind_cores_to_rank", "quiet", "q"}
_DEEPSPEED_MODULES = {"deepspeed.launcher.runner"}
DEEPSPEED_HOSTFILE = "/job/hostfile"  # runner.py line 36 DLTS_HOSTFILE, the default of -H/--hostfile
# deepspeed's flag -> the torchrun setting it becomes: deepspeed.launcher.launch gets --master_addr, --master_port
# and, with --no_ssh, --node_rank (lines 547-553); --num_nodes takes the hostfile's first N hosts (lines 521-527),
# --num_gpus the first N GPUs of each (529-533). --master_port defaults to 29500 (deepspeed/constants.py line 12).
_DEEPSPEED_FLAGS = {"num_nodes": "nnodes", "num_gpus": "nproc_per_node", "num_accelerators": "nproc_per_node",
                    "node_rank": "node_rank", "master_addr": "master_addr", "master_port": "master_port"}


def parse_deepspeed(argv: list[str], fields: list[str], i: int) -> Invocation:
    """`deepspeed [options] script.py ...`. With --no_ssh every node runs deepspeed itself, its node rank given
    (runner.py lines 157-159, 538-541): mapped onto torchrun's settings as torchrun's are. Without it the first node
    starts every node over ssh (pdsh by default) from the hostfile: `not_modelled` says so. Without a hostfile
    deepspeed runs on the local GPUs alone, master 127.0.0.1 (lines 467-477)."""
    inv = Invocation(field=fields[0] if fields else "", launcher="deepspeed", reads_pet_env=False,
                     elastic_agent=False)
    raw, i, inv.open_args = _options(argv, fields, i, _DEEPSPEED_BOOLEAN)
    if "H" in raw:
        raw.setdefault("hostfile", raw.pop("H"))
    for flag, dest in _DEEPSPEED_FLAGS.items():
        inv.spelled.setdefault(dest, f"--{flag}")
        if flag in raw and raw[flag][0] != "-1":
            inv.flags[dest] = raw[flag]
    inv.flags.setdefault("master_port", ("29500", inv.field))
    inv.flags["rdzv_backend"] = ("static", inv.field)
    if "no_ssh" in raw:
        inv.required = ("nnodes", "nproc_per_node", "node_rank", "master_addr")
    else:
        hostfile = raw.get("hostfile", (DEEPSPEED_HOSTFILE, ""))[0]
        inv.not_modelled = (f"starts every node over ssh ({raw.get('launcher', ('pdsh', ''))[0]}) from the hosts in "
                            f"{hostfile}, which the manifests do not show")
        inv.flags.setdefault("node_rank", ("0", inv.field))
        inv.flags.setdefault("nproc_per_node", ("auto", inv.field))  # every GPU of the node (lines 470-472)
    inv.script, inv.script_args = (argv[i], argv[i + 1:]) if i < len(argv) else (None, [])
    return inv


# A script that forms its world itself from its own flags, the PyTorch ImageNet example's (pytorch/examples
# imagenet/main.py at commit 77f55b91): `--world-size` (default -1, lines 62-63: the number of nodes), `--rank` (default
# -1, lines 64-65: the node rank), `--dist-url` (lines 66-67, the init_method: `tcp://HOST:PORT`, rank 0 hosting the
# store, or `env://`), `--dist-backend` (lines 68-69) and `--multiprocessing-distributed` (lines 76-80). With
# `env://` a world size or rank left at -1 is read from WORLD_SIZE (lines 104-105) and RANK (lines 151-152). With
# --multiprocessing-distributed the script spawns one process per visible GPU (ngpus_per_node =
# torch.accelerator.device_count() on CUDA, else 1: lines 118-123), the world is ngpus_per_node x --world-size
# (line 128) and process `gpu` takes rank --rank x ngpus_per_node + gpu (line 156); without it one process per pod
# whose --rank is its global rank (line 134). The convention is the example's: scripts derived from it (MoCo, DINO,
# many others) take the same flags.
DIST_URL = "the script's --dist-url"
_DIST_URL_FLAGS = {"dist_url": "master_addr", "world_size": "nnodes", "rank": "node_rank"}
_DIST_URL_BOOLEAN = {"multiprocessing_distributed"}
_DIST_URL_VALUES = {"dist_url", "world_size", "rank", "dist_backend"}


def parse_dist_url(argv: list[str], fields: list[str], i: int) -> Invocation | None:
    """`python [options] script.py ... --dist-url URL --world-size N --rank R [--multiprocessing-distributed]`: the
    ImageNet example's flags, mapped onto torchrun's settings (nnodes = --world-size, node rank = --rank, master
    address and port = the tcp:// URL's, processes per pod = the GPUs with --multiprocessing-distributed, else 1).
    None where the script is not given --dist-url (or python runs `-c` code or a module)."""
    if any(tok in ("-c", "-m") for tok in argv[1:i]) or i >= len(argv):
        return None
    raw: dict[str, tuple[str, str]] = {}
    j = i + 1
    while j < len(argv):
        tok = argv[j]
        name, eq, value = tok.partition("=")
        dest = name[2:].replace("-", "_") if name.startswith("--") else ""
        if dest in _DIST_URL_BOOLEAN and not eq:
            raw[dest] = ("true", fields[j])
        elif dest in _DIST_URL_VALUES:
            if eq:
                if isinstance(tok, shellwords.Unknown):
                    value = shellwords.Unknown(value, tok.why, tok.kind)
                raw[dest] = (value, fields[j])
            elif j + 1 < len(argv):
                raw[dest] = (argv[j + 1], fields[j + 1])
                j += 1
        j += 1
    if "dist_url" not in raw:
        return None
    inv = Invocation(field=fields[0] if fields else "", launcher=DIST_URL, reads_pet_env=False, elastic_agent=False,
                     required=("nnodes", "node_rank", "master_addr"))
    inv.script, inv.script_args = argv[i], argv[i + 1:]
    url, url_field = raw["dist_url"]
    inv.spelled.update(nnodes="--world-size", node_rank="--rank", master_addr="--dist-url",
                       master_port="--dist-url",
                       nproc_per_node="--multiprocessing-distributed (one process per GPU)"
                       if "multiprocessing_distributed" in raw else "one process per pod (no "
                       "--multiprocessing-distributed)")
    for flag, dest in _DIST_URL_FLAGS.items():
        if flag in raw and flag != "dist_url" and raw[flag][0] != "-1":
            inv.flags[dest] = raw[flag]
    if url.startswith("tcp://"):
        host, port = split_endpoint(url[len("tcp://"):].rstrip("/"), "")
        inv.flags["master_addr"] = (shellwords.Unknown(host, url.why, url.kind) if isinstance(url, shellwords.Unknown) else host,
                                    url_field)
        inv.flags["master_port"] = (shellwords.Unknown(port, url.why, url.kind) if isinstance(url, shellwords.Unknown) else port,
                                    url_field)
    elif url == "env://":
        # init_method env:// reads MASTER_ADDR and MASTER_PORT (torch/distributed/rendezvous.py _env_rendezvous_handler)
        inv.env_names.update(master_addr="MASTER_ADDR", master_port="MASTER_PORT", nnodes="WORLD_SIZE",
                             node_rank="RANK")
    inv.flags["rdzv_backend"] = ("static", url_field)
    mp = raw.get("multiprocessing_distributed")
    inv.flags["nproc_per_node"] = ("auto", mp[1]) if mp else ("1", inv.field)
    return inv


_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Words before the program that run it in the same process or a child with the same argv (`exec torchrun`, `env
# VAR=1 torchrun`, `time torchrun`, `nohup torchrun`).
_PREFIXES = ("exec", "env", "time", "nohup", "command")
_OPTION_ARGS = {("env", "-u"), ("env", "--unset"), ("env", "-C"), ("env", "--chdir"), ("exec", "-a")}


def find_invocation(argv: list[str], fields: list[str], env: dict[str, str | None],
                    hostname: str | None = None) -> Invocation | None:
    """Find torchrun in a container's command+args (Kubernetes `$(VAR)` already expanded), also inside a `sh -c`
    script (policies/command/shell.py reads it, `hostname` being the pod's). Raises shell.ShellError where the container
    runs a script that cannot be read."""
    inv = parse_argv(argv, fields)
    if inv is not None:
        return inv
    i = script_index(argv)
    if i is not None:
        script_field = fields[i + 1]
        host = hostname if hostname is not None else str(env.get("HOSTNAME") or "")
        for cmd in shell.Script(argv[i + 1], env, host, argv[i + 2:]).commands():
            words = list(cmd.argv)
            scoped: dict[str, str] = {}
            while words and words[0] in _PREFIXES:
                head = words.pop(0)
                while words:
                    w = words[0]
                    if head == "env" and _ASSIGNMENT.match(w):  # `env VAR=1 torchrun`
                        name, _, value = words.pop(0).partition("=")
                        scoped[name] = value
                    elif w == "--":
                        words.pop(0)
                        break
                    elif w.startswith("-"):  # `env -u X`, `exec -a name`: options of the prefix
                        words.pop(0)
                        if (head, w) in _OPTION_ARGS and words:
                            words.pop(0)
                    else:
                        break
            if not words or isinstance(words[0], shellwords.Unknown):
                continue
            # Words that are the script's positional arguments as written (`exec "$@"`) are read where they are
            # written, after the script and its $0; any others are the script's own.
            tail = len(argv) - len(words)
            at = fields[tail:] if tail >= i + 3 and words == argv[tail:] else [script_field] * len(words)
            found = parse_argv(words, at)
            if found is not None:
                found.in_shell = True
                found.within = cmd.within
                found.env = {**{k: cmd.env[k] for k in cmd.exported if k in cmd.env}, **scoped}
                found.tainted = cmd.tainted
                return found
    return None


def script_index(argv: list[str]) -> int | None:
    """Where a shell's `-c` is in `sh [-flags] -c 'script' [$0 $1 ...]` (or `bash -xc 'script'`): the script is the
    next word; None where argv runs no shell script."""
    if not argv or argv[0].rsplit("/", 1)[-1] not in _SHELLS:
        return None
    return next((i for i in range(1, len(argv) - 1) if argv[i].startswith("-") and "c" in argv[i][1:]), None)


def split_nnodes(value: str) -> tuple[int | None, int | None]:
    """`4` -> (4, 4); `1:4` -> (1, 4); anything unresolved -> (None, None)."""
    parts = value.split(":")
    try:
        if len(parts) == 1:
            n = int(parts[0])
            return n, n
        if len(parts) == 2:
            return int(parts[0]), int(parts[1])
    except ValueError:
        pass
    return None, None


def split_endpoint(value: str, default_port: str = "29400") -> tuple[str, str]:
    """`host:port` -> (host, port); a bare host gets torchrun's c10d default port."""
    if value.startswith("[") and "]" in value:  # [ipv6]:port
        host, _, rest = value[1:].partition("]")
        return host, rest.lstrip(":") or default_port
    if value.count(":") == 1:
        host, port = value.split(":")
        return host, port
    return value, default_port


# What code that takes part in a torch.distributed world (or reads its rendezvous env) shows in its text.
# What env:// initialisation reads (MASTER_ADDR, WORLD_SIZE) and torchrun's node count set by hand (PET_NNODES): a
# container that gets one takes part in a distributed world (model/topology.py is_training, launchers/unmodelled.py).
WORLD_ENV: tuple[str, ...] = ("MASTER_ADDR", "WORLD_SIZE", "PET_NNODES")
DISTRIBUTED_CODE = re.compile(r"torch\.distributed|init_process_group|from\s+torch\s+import\s+distributed|"
                              r"\b(MASTER_ADDR|WORLD_SIZE|RANK|LOCAL_RANK)\b|accelerate|deepspeed")


def inline_python(argv: list[str]) -> str | None:
    """The program of `python [options] -c CODE ...`: the code itself, visible in the manifest; None for any other
    command (a script file or module, whose code the manifest does not show)."""
    if not argv or not argv[0].rsplit("/", 1)[-1].startswith("python"):
        return None
    for i, tok in enumerate(argv[1:], 1):
        if tok == "-c":
            return argv[i + 1] if i + 1 < len(argv) else None
        if not tok.startswith("-") or tok in ("-m", "-"):
            return None
    return None
