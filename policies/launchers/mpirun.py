"""mpirun's command line (Open MPI's mpirun(1); MPICH and Intel MPI's hydra `mpiexec`) and the checks of the world
it names, for every launcher: an MPIJob's launcher and a TrainJob's MPI runtime (whose controllers write the
hostfile, mpijob.py and trainjob_frameworks.py), and the first pod of a world no MPI controller lays out (a plain
Indexed Job, a StatefulSet, a JobSet's leader), where its command states the hosts (`-H`, or a `--hostfile` mounted
from the manifests)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..command import shell
from ..command.torchrun import Invocation, parse_argv, script_index, split_nnodes
from ..kube.objects import WARNING
from ..kube.values import as_int
from .base import Check, Names, Workload

# The hostfile the MPI Operator (kubeflow/mpi-operator v0.8.0 pkg/controller/mpi_job_controller.go 74-118) and the
# Trainer's MPI plugin (kubeflow/trainer v2.3.0 constants.go 88-92) mount, and the implementations they know.
HOSTFILE = "/etc/mpi/hostfile"
OPEN_MPI, INTEL, MPICH = "OpenMPI", "Intel", "MPICH"

_MPIRUN = ("mpirun", "mpiexec", "mpiexec.hydra", "orterun", "prterun", "horovodrun")
# Any of them within a word (a word of a command is a name of _MPIRUN only where it holds one).
_MPIRUN_IN = re.compile("|".join(re.escape(name) for name in _MPIRUN))
_NP = re.compile(r"^-{1,2}(?:np|n|c|num-proc)$")  # horovodrun: -np/--num-proc
_NP_JOINED = re.compile(r"^-{1,2}(?:np|n)=(\d+)$")


@dataclass
class MpiRun:
    """An mpirun command line found in the launcher: its ranks (-np), whether it may oversubscribe, the command it
    starts on every rank, and the field of the word that starts it."""

    np: int | None
    oversubscribe: bool
    program: list[str]
    field: str
    # -H/--host `host[:slots],...` (a host without `:slots` has one), --hostfile/--machinefile, and `-x NAME=VALUE`.
    hosts: list[tuple[str, int | None]] | None = None
    hostfile: str | None = None
    exported: dict[str, str | None] | None = None
    # The option that gave the hosts (`-H`, `--host`: Open MPI's, which refuses more ranks than slots; `-hosts`:
    # hydra's, which does not).
    host_option: str | None = None
    # -np's word where it is no number (`-np $NP`, computed at run time): the ranks are then unknown, not the slots'.
    np_text: str | None = None


def _script_commands(argv: list[str], fields: list[str], env: dict[str, str | None],
                     hostname: str) -> list[list[tuple[str, str]]] | None:
    """The simple commands of a `sh -c` script (`bash -xc ...`) as the shell runs them (policies/command/shell.py:
    mvdan/sh's parser; a `\\`-newline continues a line, quotes group words, a value known only at run time stays its
    text), each word with the script's field; None where argv runs no script, or one that cannot be read."""
    i = script_index(argv)
    if i is None:
        return None
    try:
        return [[(str(x), fields[i + 1]) for x in cmd.argv]
                for cmd in shell.Script(argv[i + 1], env, hostname, argv[i + 2:]).commands()]
    except shell.ShellError:
        return None


def find_mpirun(argv: list[str], fields: list[str], env: dict[str, str | None] | None = None,
                hostname: str = "") -> MpiRun | None:
    """The first mpirun (mpiexec, horovodrun ...) in a launcher's command and args, also inside a `sh -c` script,
    read as the shell reads it with the container's `env` (a value computed at run time is not read); a script that
    cannot be parsed is split at white space."""
    if not _MPIRUN_IN.search("\n".join(argv)):  # no word names one (most commands: torchrun, python)
        return None
    commands = _script_commands(argv, fields, env or {}, hostname)
    if commands is None:
        words: list[tuple[str, str]] = []
        for tok, where in zip(argv, fields):
            parts = tok.split() if (" " in tok or "\n" in tok) else [tok]
            words += [(p, where) for p in parts if p != "\\"]
        commands = [words]
    for words in commands:
        run = _mpirun_in(words)
        if run is not None:
            return run
    return None


def _mpirun_in(words: list[tuple[str, str]]) -> MpiRun | None:
    for i, (w, where) in enumerate(words):
        if w.rsplit("/", 1)[-1] not in _MPIRUN:
            continue
        np = None
        np_text: str | None = None
        over = False
        hosts: list[tuple[str, int | None]] | None = None
        host_option: str | None = None
        hostfile: str | None = None
        exported: dict[str, str | None] = {}
        j = i + 1
        while j < len(words):
            word = words[j][0]
            name, eq, value = word.partition("=")
            if name in _HOST or name in _HOSTFILE or name == "-x":
                if not eq:
                    if j + 1 >= len(words):
                        break
                    value = words[j + 1][0]
                    j += 1
                if name in _HOST:
                    hosts = (hosts or []) + [_host_slots(h) for h in _host_words(value) if h]
                    host_option = name
                elif name in _HOSTFILE:
                    hostfile, host_option = value, name
                else:
                    var, has, val = value.partition("=")
                    exported[var] = val if has else None  # `-x NAME`: the launcher's own value
                j += 1
                continue
            if name in _VALUES or name in _TWO_VALUES:
                if name in ("--map-by", "-map-by") and "OVERSUBSCRIBE" in (value if eq else words[min(j + 1, len(
                        words) - 1)][0]).upper():
                    over = True
                j += 1 + (0 if eq else 1) + (1 if name in _TWO_VALUES else 0)
                continue
            joined = _NP_JOINED.match(word)
            if _NP.match(word) and j + 1 < len(words):
                np = as_int(words[j + 1][0])
                np_text = None if np is not None else words[j + 1][0]
                j += 2
                continue
            if joined:
                np = int(joined.group(1))
            elif word.lstrip("-") in ("oversubscribe",) or word in ("--map-by", "-map-by") and j + 1 < len(words) \
                    and "OVERSUBSCRIBE" in words[j + 1][0].upper():
                over = True
            elif not word.startswith("-"):
                break
            j += 1
        program = [x for x, _ in words[j:]]
        for end, x in enumerate(program):  # the command ends where the shell's next one begins
            if x in ("&&", ";", "||", "|"):
                program = program[:end]
                break
        return MpiRun(np, over, program, where, hosts, hostfile, exported, host_option, np_text)
    return None


def mpirun_words(run: MpiRun, impl: str, owner: str, checked: str) -> str:
    """What mpirun starts, in TOPO012's words: its ranks, the program, where it takes its hosts from (`owner`'s
    hostfile at /etc/mpi/hostfile, where `checked` says what is checked of them) and what is not checked."""
    np = f"-np {run.np}" if run.np is not None else f"-np `{run.np_text}` (known at run time)" if run.np_text else \
        "the -H slots' number of" if run.hosts else "the slots' number of"
    program = " ".join(run.program[:2]) or "its program"
    if torchrun_under(run) is not None:
        words = _torchrun_words(run)
        program = " ".join(words[:3] if words[0].rsplit("/", 1)[-1].startswith("python") else words[:2])
        # torchrun reads its own flags (and PET_* env), never OMPI_COMM_WORLD_RANK or PMI_RANK: each rank is one
        # torchrun agent, i.e. one node of torchrun's world (torch/distributed/run.py).
        return (f"mpirun starts {np} ranks, {UNDER_MPIRUN} (`{program}`), which reads its own flags, not "
                "mpirun's rank (TOPO011 checks --nnodes, --node-rank and --standalone against the ranks): the "
                "rendezvous endpoint, the processes per node and the rest of TOPO001-TOPO010 were not checked")
    if run.hostfile is not None and run.hostfile != HOSTFILE:
        where = (f"its hosts come from {run.hostfile}, not {owner} {HOSTFILE}: the slots and the host of rank 0 "
                 "were not checked")
    else:
        where = checked
    rank = "OMPI_COMM_WORLD_RANK" if impl == OPEN_MPI else "PMI_RANK"
    return (f"mpirun starts {np} ranks of `{program}`, each taking its rank from {rank}; {where}; "
            "the rendezvous the script joins is checked only where -x MASTER_ADDR or a tcp:// --dist-url shows it")


# The words TOPO012 says for torchrun started by mpirun (its fix is then not "start the script with torchrun").
UNDER_MPIRUN = "each running its own torchrun agent"


def torchrun_under(run: MpiRun) -> Invocation | None:
    """torchrun (`python -m torch.distributed.run`) as the program mpirun starts on every rank; None otherwise."""
    words = _torchrun_words(run)
    inv = parse_argv(words, [run.field] * len(words)) if words else None
    return inv if inv is not None and inv.launcher == "torchrun" else None


def _torchrun_words(run: MpiRun) -> list[str]:
    """The program mpirun starts, past a `sh -c` / `bash -c` it runs torchrun through (each rank's shell then expands
    `$OMPI_COMM_WORLD_RANK` itself; find_mpirun split the script at white space)."""
    program = run.program
    if len(program) > 2 and program[0].rsplit("/", 1)[-1] in ("sh", "bash") and program[1] == "-c":
        return program[2:]
    return program


def starts_torchrun(run: MpiRun) -> bool:
    """torchrun somewhere in the program mpirun starts, whether or not `torchrun_under` could read it (after a
    `cd ... &&`, as `python -m torch.distributed.run`, or the deprecated `torch.distributed.launch`, which runs the
    same agent: launch.py's main calls run.run): torchrun then gives its workers MASTER_ADDR and MASTER_PORT itself
    (torch 2.13: local_elastic_agent.py 424, from its --master-addr, default 127.0.0.1, which reads PET_MASTER_ADDR,
    not MASTER_ADDR: run.py 629-633), so mpirun's `-x MASTER_ADDR` and rank 0's slot name no store."""
    return any(word in x for x in run.program for word in ("torchrun", "torch.distributed.run",
                                                           "torch.distributed.launch"))


def ranks_over_hosts(run: MpiRun, slots: int | None, hosts: int) -> tuple[int | None, int]:
    """How many ranks mpirun starts and over how many hosts: -np, else the slots -H names (None where a host names
    none), else the hostfile's `slots`; over -H's hosts, else the hostfile's `hosts`."""
    if run.np_text is not None:
        return None, len(run.hosts) if run.hosts is not None else hosts
    if run.hosts is None:
        return (run.np if run.np is not None else slots), hosts
    if run.np is not None:
        return run.np, len(run.hosts)
    named = [n for _, n in run.hosts]
    return (None if None in named else sum(n for n in named if n is not None)), len(run.hosts)


def torchrun_agents(run: MpiRun, inv: Invocation, pod: Any, agents: int | None, hosts: int) -> list[Check]:
    """torchrun under mpirun: mpirun starts `agents` ranks (its -np, else the hostfile's slots) over `hosts` hosts,
    each one torchrun agent, i.e. one node of torchrun's world. torchrun takes --nnodes (default 1:1), --node-rank
    (default 0) and the rendezvous from its own flags or PET_* env (here only what `-x` exports), never from
    OMPI_COMM_WORLD_RANK; --standalone is a c10d rendezvous at localhost:0 per agent (torch 2.13
    torch/distributed/run.py 426-429, 620-624, 988-991; mpirun(1) -x). The hosts and slots are the controller's
    hostfile (kubeflow/trainer v2.3.0 mpi.go 316-330, kubeflow/mpi-operator v0.8.0 mpi_job_controller.go) or -H.
    What that world is, where the command shows it; `inv` is torchrun_under(run)."""
    if not agents:
        return []
    env: dict[str, str | None] = {}
    for name, value in (run.exported or {}).items():
        env[name] = value if value is not None else pod.env.get(name)
    out: list[Check] = []
    if hosts and agents > hosts:
        out.append(Check(run.field, f"torchrun under mpirun: {agents} ranks over {hosts} hosts start several torchrun "
                         "agents on one host, each with its own rendezvous port and --nproc-per-node processes",
                         "run one rank per host (-np <hosts> --map-by ppr:1:node) and let torchrun start the "
                         "processes", severity=WARNING))
    nnodes = inv.setting("nnodes", env, {})
    backend = inv.setting("rdzv_backend", env, {}).value
    said = f"--nnodes {nnodes.value}" + (" (torchrun's default)" if nnodes.origin == "default" else "")
    if "standalone" in inv.flags:
        if agents > 1:
            out.append(Check(run.field, f"torchrun --standalone under mpirun's {agents} ranks: each agent forms a "
                             "world of its own on localhost, so the ranks never train together",
                             f"drop --standalone and give --nnodes {agents} --rdzv-backend c10d --rdzv-endpoint "
                             "<first host>:29400"))
        return out
    lo, hi = split_nnodes(nnodes.value)
    if lo is None or hi is None or "$" in backend:
        return out
    if backend == "static":
        if hi == 1 and agents > 1:
            out.append(Check(nnodes.field or run.field, f"torchrun under mpirun's {agents} ranks gets {said}: each "
                             "agent forms a world of one, so the ranks never train together",
                             f"give --nnodes {agents} and a c10d rendezvous on the first host"))
            return out
        if lo != agents:
            out.append(Check(nnodes.field or run.field, f"torchrun under mpirun gets {said} but mpirun starts "
                             f"{agents} ranks, one torchrun agent each: the static rendezvous waits for {lo} nodes",
                             f"set --nnodes {agents}, or -np {lo}"))
        rank = inv.setting("node_rank", env, {})
        if agents > 1 and "$" not in rank.value:
            out.append(Check(rank.field or run.field, f"every one of mpirun's {agents} torchrun agents gets "
                             f"--node-rank {rank.value}" + (" (torchrun's default)" if rank.origin == "default" else "")
                             + ": the static rendezvous needs a distinct rank per node, and torchrun does not read "
                             "mpirun's OMPI_COMM_WORLD_RANK", "use --rdzv-backend c10d with --rdzv-endpoint on the "
                             "first host (it assigns the ranks), or pass --node-rank from OMPI_COMM_WORLD_RANK"))
        return out
    if lo > agents:
        out.append(Check(nnodes.field or run.field, f"torchrun under mpirun gets {said} but mpirun starts {agents} "
                         f"ranks, one torchrun agent each: the {backend} rendezvous waits for {lo} nodes and never "
                         "completes", f"set --nnodes {agents}, or -np {lo}"))
    elif agents > hi:
        out.append(Check(nnodes.field or run.field, f"torchrun under mpirun gets {said} but mpirun starts {agents} "
                         f"ranks, one torchrun agent each: the {backend} rendezvous admits at most {hi}, and the other "
                         f"{agents - hi} wait for a later round", f"set --nnodes {agents}, or -np {hi}",
                         severity=WARNING))
    return out


# Open MPI mpirun(1): `-H, --host <host1,host2,...>` (`host:N` for N slots) and `--hostfile, --machinefile <file>`;
# MPICH and Intel MPI's hydra take `-hosts` and `-f`/`-hostfile`/`-machinefile`.
_HOST = ("-H", "--host", "-host", "-hosts", "--hosts")
# Options that take one value (two for the MCA ones), so that their value is not taken for the program.
_VALUES = ("--bind-to", "-bind-to", "--map-by", "-map-by", "--rank-by", "-rank-by", "-wdir", "--wdir", "-npernode",
           "--npernode", "-N", "-ppn", "-envlist", "--output-filename", "-output-filename",
           "--prefix", "-prefix", "-iface", "-bootstrap",
           # horovodrun's (horovod/runner/launch.py parse_args, its elastic group among them)
           "--min-np", "--max-np", "--min-num-proc", "--max-num-proc", "--slots-per-host", "--host-discovery-script",
           "--elastic-timeout", "--reset-limit", "--start-timeout", "--network-interface")
_TWO_VALUES = ("-mca", "--mca", "-gmca", "--gmca", "-genv", "--blacklist-cooldown-range")
_HOSTFILE = ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "-f", "--default-hostfile")


def _host_words(value: str) -> list[str]:
    """-H's `host[:slots],...` split at its commas, but not at those inside a value the shell works out when it runs
    (`$(cat /etc/volcano/worker.host | tr "\\n" ",")`, `${HOSTS}`, backticks, quotes), which stays one word."""
    words, word, depth, quote = [], "", 0, ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in "({":
            depth += 1
        elif ch in ")}":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            words.append(word)
            word = ""
            continue
        word += ch
    return words + [word]


def _host_slots(text: str) -> tuple[str, int | None]:
    host, colon, slots = text.rpartition(":")
    if not colon or any(c in slots for c in ")}`'\""):  # no `:slots`, or the colon is inside an expansion
        return text, 1
    return host, (as_int(slots) if slots else 1)


def np_within_hosts(run: MpiRun, impl: str, listed: str = "-H lists") -> list[Check]:
    """Open MPI's `-np` against the slots of the hosts the command names (`-H host:slots,...`, or a hostfile read
    here): more ranks than slots without --oversubscribe and it refuses to start."""
    slots = [n for _, n in run.hosts or []]
    if run.np is None or None in slots or impl != OPEN_MPI or run.oversubscribe:
        return []
    total = sum(n for n in slots if n is not None)
    if run.np <= total:
        return []
    return [Check(run.field, f"mpirun -np {run.np} but {listed} {total} slots: Open MPI refuses to start (not enough "
                  "slots available)", f"set -np {total}, add slots to -H, or add --oversubscribe")]


# Open MPI's hostfile lines (mpirun(1) "Specifying Host Nodes"): `host [slots=N] [max_slots=M]`, `#` comments.
_HOSTFILE_LINE = re.compile(r"^\s*([^\s#]+)(?:.*?\bslots\s*=\s*(\d+))?")


def hostfile_hosts(text: str) -> list[tuple[str, int | None]]:
    """(host, slots) of each hostfile line; None for a line without `slots=`, which Open MPI gives the node's
    processor cores (its "not enough slots" help text, 4.1 and PRRTE alike: "Hostfile, via slots=N clauses (N
    defaults to number of processor cores if not provided)"; `-H host` without `:N` is 1), not in the manifests."""
    out: list[tuple[str, int | None]] = []
    for line in text.splitlines():
        m = _HOSTFILE_LINE.match(line)
        if m:
            out.append((m.group(1), int(m.group(2)) if m.group(2) else None))
    return out


# The most pod hostnames made to tell whether a named host is one of them (bounded memory and time on any input).
_MOST_NAMES = 10_000


def leader_mpirun(w: Workload) -> tuple[MpiRun, Any] | None:
    """The mpirun (mpiexec ...) the first pod of a world no MPI controller lays out starts (a plain Indexed Job's,
    a StatefulSet's, a JobSet's leader), and that pod; None where it starts none, or where the controller writes the
    hostfile (Launcher.mpi_world: its own checks apply)."""
    if w.pods == 0 or w.unresolved is not None or w.odd_group is not None or w.managed_by is not None or \
            w.launcher.mpi_world(w) is not None:
        return None
    pod = w.pod(0)
    if not pod.containers:
        return None
    run = find_mpirun(*pod.argv(), pod.env, pod.hostname)
    return (run, pod) if run is not None else None


def _stated_hosts(run: MpiRun, pod: Any) -> str | None:
    """Fills run.hosts from a hostfile the manifests mount (a ConfigMap or Secret), where -H gives none; what could
    not be read, in words (None where the hosts are known)."""
    if run.hosts is not None:
        late = [h for h, _ in run.hosts if "$" in h or "`" in h]
        return f"its hosts ({late[0]}) are known only when it runs" if late else None
    if run.hostfile is not None and ("$" in run.hostfile or "`" in run.hostfile):
        return f"its hostfile ({run.hostfile}) is known only when it runs"
    if run.hostfile is not None:
        text = pod.file(run.hostfile) if run.hostfile.startswith("/") else None
        if text is None:
            return f"its hosts come from {run.hostfile}, which no ConfigMap or Secret in the manifests is mounted at"
        run.hosts = hostfile_hosts(text)
        return None
    return "it names no hosts (-H, --hostfile): they come from its default hostfile or environment"


def leader_mpirun_checks(w: Workload) -> list[Check]:
    """mpirun started by the leader of a world no MPI controller lays out, where its command states the hosts (-H,
    or a hostfile mounted from the manifests): each host named under this world's headless Service (its subdomain)
    is one of its pods, as an MPIJob's -H hosts are its workers, -np within the slots listed (Open MPI), and an
    `-x MASTER_ADDR` or tcp:// --dist-url naming the first host, where rank 0 runs (the MPIJob's checks)."""
    found = leader_mpirun(w)
    if found is None:
        return []
    run, pod = found
    if _stated_hosts(run, pod) is not None or not run.hosts:
        return []
    out: list[Check] = []
    subdomain = pod.subdomain
    names = Names([(g.count, g.hostname) for g in w.world_groups])
    if subdomain and len(names) <= _MOST_NAMES:
        known = set(names)  # made once: each host is then looked up, not walked to
        for host, _ in run.hosts:
            first, _, rest = host.partition(".")
            if rest.split(".")[0] == subdomain and first not in known:
                out.append(Check(run.field, f"mpirun {run.host_option} names {host}, under the subdomain {subdomain} "
                                 f"of this {w.manifest.kind}'s pods, but none of them has hostname {first} (its "
                                 f"pods: {names.shown() or 'none'}): the name does not resolve and mpirun fails",
                                 f"list only {names[0]}..{names[-1]}.{subdomain}" if names else "add pods"))
    # Open MPI's spellings (mpirun(1)); hydra's (-hosts, -f) admit more ranks than slots.
    open_mpi = run.host_option in ("-H", "--host", "--hostfile", "--machinefile", "--default-hostfile")
    listed = "-H lists" if run.hostfile is None else f"the hostfile {run.hostfile} lists"
    out += np_within_hosts(run, OPEN_MPI if open_mpi else MPICH, listed)
    if (inv := torchrun_under(run)) is not None:  # one torchrun agent per rank, over the hosts listed
        out += torchrun_agents(run, inv, pod, *ranks_over_hosts(run, None, 0))
    elif not starts_torchrun(run):
        first, _, rest = run.hosts[0][0].partition(".")
        out += rank_zero_address(w, run, pod, first, rest.split(".")[0] or subdomain)
    return out


def leader_mpirun_unchecked(w: Workload) -> tuple[str, str] | None:
    """TOPO012's words and hint where the leader's mpirun does not state its hosts, or their slots, in the
    manifests."""
    found = leader_mpirun(w)
    if found is None:
        return None
    run, pod = found
    why = _stated_hosts(run, pod)
    if why is None:
        bare = [h for h, n in run.hosts or [] if n is None]
        if not bare or run.oversubscribe:
            return None
        # (hostfile_hosts: a line without slots= has the node's processor cores)
        return (f"mpirun's hostfile {run.hostfile} gives {bare[0]}{' and others' if len(bare) > 1 else ''} no "
                "slots=, so Open MPI gives each its node's processor cores, which the manifests do not show: "
                f"{'-np ' + str(run.np) if run.np is not None else 'the number of ranks'} was not checked against "
                "the slots", "give each hostfile line slots=N (the ranks its node runs, e.g. its GPUs) to have -np "
                "checked")
    np = f"-np {run.np}" if run.np is not None else "its"
    return (f"mpirun starts {np} ranks of `{' '.join(run.program[:2]) or 'its program'}`, but {why}: the hosts, "
            "their slots and the host of rank 0 were not checked", "name the hosts with -H host:slots,... (or mount "
            "the hostfile from a ConfigMap) to have them checked")


# The variables a script under mpirun reads its rendezvous from (torch's env:// init_method) and the ImageNet example's
# --dist-url (policies/command/torchrun.py DIST_URL): rank 0, the first slot of the first host (Open MPI maps by slot), hosts
# the store every other rank connects to.
def rank_zero_address(w: Workload, run: MpiRun, pod: Any, first_host: str, subdomain: str | None = None,
                      older: tuple[str, str] | None = None) -> list[Check]:
    """`older`: the pods' subdomain under another release of the controller, and why: a host under it resolves
    there, so the finding holds only under the release modelled (a warning phrased as that condition)."""
    program = run.program
    if not any(x.rsplit("/", 1)[-1].startswith("python") for x in program):
        return []
    address: tuple[str, str] | None = None
    for k, x in enumerate(program):
        if x.startswith("--dist-url=tcp://") or x.startswith("--dist_url=tcp://"):
            address = (x.split("://", 1)[1], "--dist-url")
        elif x in ("--dist-url", "--dist_url") and k + 1 < len(program) and program[k + 1].startswith("tcp://"):
            address = (program[k + 1].split("://", 1)[1], "--dist-url")
    if address is None and run.exported is not None and "MASTER_ADDR" in run.exported:
        value = run.exported["MASTER_ADDR"]
        value = value if value is not None else pod.env.get("MASTER_ADDR")
        if value is not None:
            address = (str(value), "-x MASTER_ADDR")
    if address is None or "$" in address[0]:
        return []
    host = address[0].rsplit(":", 1)[0] if address[1] == "--dist-url" else address[0]
    ns = w.manifest.namespace
    namespace = rf"(\.{re.escape(ns)}" if ns else r"(\.[a-z0-9-]+"
    subdomain = subdomain or w.manifest.name
    ok = re.fullmatch(re.escape(f"{first_host}.{subdomain}") + namespace + r"(\.svc(\.[a-z0-9.-]+)?)?)?\.?",
                      host)
    if ok:
        return []
    fix = f"point it at {first_host}.{subdomain}"
    if older is not None and re.fullmatch(re.escape(f"{first_host}.{older[0]}") + namespace + r"(\.svc(\.[a-z0-9.-]+)?)?)?\.?",
                                          host):
        return [Check(run.field, f"{address[1]} names '{host}', {older[1]}: the other ranks wait for a store that "
                      "is not there", f"{fix}, the name the later releases resolve", severity=WARNING)]
    return [Check(run.field, f"{address[1]} names '{host}', but rank 0 (the first slot mpirun fills) runs on "
                  f"{first_host}: the other ranks wait for a store that is not there", fix)]
