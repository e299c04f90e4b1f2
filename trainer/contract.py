"""The trainer's contract: every environment variable `/app/trainer/train.py` reads and the values it accepts.

Declared here once, with no import beyond the standard library (no torch), so that the validator reads it too:
rules TRAINER001 and TRAINER002 (policies/rules/) check every workload that starts the trainer against it, and
the trainer's parser (`trainer.cli.env_reader`) refuses a flag default from a variable not declared here. tests/test_trainer_contract.py checks
this table against the trainer's own parser (names, flags, choices), so the two cannot drift.

A variable that is a flag's default is read only when the flag is not on the command line (a flag wins). A value
the trainer refuses ends every rank with exit 2 before training (argparse's error), so the validator calls it an
error; the variables read outside the parser (metrics, MLflow, Kubeflow Trainer's progress, threads) never stop a
run and are declared for their names only.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

# The trainer as the image holds it (Dockerfile: the package at /app/trainer), and as a module.
SCRIPT = "/app/trainer/train.py"
MODULE = "trainer.train"

BACKENDS = ("auto", "nccl", "gloo")
AMP = ("none", "bf16")
TASKS = ("synthetic", "digits", "mnist", "fashion-mnist", "causal-lm")
LR_SCHEDULES = ("cosine", "constant")
STRATEGIES = ("ddp", "fsdp")
AFTER_DONE = ("exit", "wait")
TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# How a value is read (trainer/flags.py and trainer/cli.py's argument types).
CHOICE = "one of a set"
POSITIVE_INT = "a whole number above 0"
NON_NEGATIVE_INT = "a whole number, 0 or more"
INT = "a whole number"
POSITIVE_FLOAT = "a number above 0"
FLOAT = "a number"
SECONDS = "a number of seconds above 0"
BOOL = "true/false (1/true/yes/on or 0/false/no/off)"
FOLDER_NAME = "a plain folder name ([A-Za-z0-9._-], 128 at most, not . or ..)"
TEXT = "any text"


@dataclass(frozen=True)
class Var:
    """One variable: how its value is read, and the flag it is the default of (None: read outside the parser)."""

    name: str
    kind: str = TEXT
    flag: str | None = None
    choices: tuple[str, ...] = ()

    def refuses(self, value: str) -> str | None:
        """Why the trainer refuses `value` (exit 2 on every rank), or None when it accepts it."""
        if self.flag is None:
            return None
        text = str(value)
        if self.kind == CHOICE:
            return None if text in self.choices else f"expected one of {', '.join(self.choices)}"
        if self.kind == BOOL:
            return None if text.strip().lower() in TRUE + FALSE else f"expected {BOOL}"
        if self.kind == FOLDER_NAME:
            return None if RUN_ID.match(text) and text not in (".", "..") else f"expected {FOLDER_NAME}"
        if self.kind in (POSITIVE_INT, NON_NEGATIVE_INT, INT):
            try:
                number = int(text)
            except ValueError:
                return f"expected {self.kind}"
            low = {POSITIVE_INT: 1, NON_NEGATIVE_INT: 0}.get(self.kind)
            return f"expected {self.kind}" if low is not None and number < low else None
        if self.kind in (POSITIVE_FLOAT, FLOAT, SECONDS):
            try:
                real = float(text)
            except ValueError:
                return f"expected {self.kind}"
            if self.kind != FLOAT and (not real > 0 or (self.kind == SECONDS and math.isinf(real))):
                return f"expected {self.kind}"
        return None


_VARS = (
    # train.py
    Var("TASK", CHOICE, "--task", TASKS),
    Var("EPOCHS", POSITIVE_INT, "--epochs"),
    Var("BATCH_SIZE", POSITIVE_INT, "--batch-size"),
    Var("LR", POSITIVE_FLOAT, "--lr"),
    Var("SEED", INT, "--seed"),
    Var("SAMPLES", POSITIVE_INT, "--samples"),
    Var("FEATURES", POSITIVE_INT, "--features"),
    Var("CLASSES", POSITIVE_INT, "--classes"),
    Var("DATA_ROOT", TEXT, "--data-root"),
    Var("OUT_DIR", TEXT, "--out-dir"),
    Var("RUN_ID", FOLDER_NAME, "--run-id"),
    Var("DIST_BACKEND", CHOICE, "--backend", BACKENDS),
    Var("AMP", CHOICE, "--amp", AMP),
    Var("CHANNELS_LAST", BOOL, "--channels-last"),
    Var("LOG_INTERVAL", POSITIVE_INT, "--log-interval"),
    Var("TERMINATION_GRACE_PERIOD_SECONDS", SECONDS, "--grace-period"),
    Var("PG_TIMEOUT", SECONDS, "--pg-timeout"),
    Var("CHECKPOINT_EVERY", POSITIVE_INT, "--checkpoint-every"),
    Var("CHECKPOINT_STEPS", NON_NEGATIVE_INT, "--checkpoint-steps"),
    Var("MAX_STEPS", POSITIVE_INT, "--max-steps"),
    Var("AFTER_DONE", CHOICE, "--after-done", AFTER_DONE),
    Var("RECORD_SHARDS", BOOL, "--record-shards"),
    Var("COMPILE", BOOL, "--compile"),
    Var("PHASE_TIMEOUT", SECONDS, "--phase-timeout"),
    # tasks/causal_lm.py
    Var("MODEL_LOCAL_DIR", TEXT, "--model-local-dir"),
    Var("TOKENIZER_LOCAL_DIR", TEXT, "--tokenizer-local-dir"),
    Var("MODEL_ID", TEXT, "--model-id"),
    Var("LOCAL_FILES_ONLY", BOOL, "--local-files-only"),
    Var("TRAIN_FILE", TEXT, "--train-file"),
    Var("VAL_FILE", TEXT, "--val-file"),
    Var("SEQ_LEN", POSITIVE_INT, "--seq-len"),
    Var("GRAD_ACCUM", POSITIVE_INT, "--grad-accum"),
    Var("CLIP_GRAD", FLOAT, "--clip-grad"),
    Var("WARMUP_STEPS", NON_NEGATIVE_INT, "--warmup-steps"),
    Var("LR_SCHEDULE", CHOICE, "--lr-schedule", LR_SCHEDULES),
    Var("MIN_LR_RATIO", FLOAT, "--min-lr-ratio"),
    Var("WEIGHT_DECAY", FLOAT, "--weight-decay"),
    Var("STRATEGY", CHOICE, "--strategy", STRATEGIES),
    Var("TOKEN_CACHE", TEXT, "--token-cache"),
    Var("SAVE_EPOCHS", BOOL, "--save-epochs"),
    # Read outside the parser: observers that never stop a run, and the libraries' own switches.
    Var("PAUSE_AT_STEPS"),                    # loop.py: make simulate's step faults (trainer/stop.py)
    Var("METRICS_PORT"),                      # telemetry.py: local rank r serves METRICS_PORT + r
    Var("MLFLOW_TRACKING_URI"),               # mlflow_log.py
    Var("MLFLOW_EXPERIMENT_NAME"),
    Var("MLFLOW_ALLOW_FILE_STORE"),
    Var("LAUNCHER"),                          # mlflow_log.py: run tags
    Var("OVERLAY"),
    Var("KUBEFLOW_TRAINER_SERVER_URL"),       # progress.py: Kubeflow Trainer's status server
    Var("KUBEFLOW_TRAINER_SERVER_CA_CERT"),
    Var("KUBEFLOW_TRAINER_SERVER_TOKEN"),
    Var("OMP_NUM_THREADS"),                   # threads.py
    Var("HUGGINGFACE_HUB_TOKEN"),             # tasks/causal_lm.py
    Var("TRANSFORMERS_OFFLINE"),
    Var("HF_HUB_OFFLINE"),
    Var("HF_TOKEN_PATH"),                     # huggingface_hub reads the token file it names
)

ENV: dict[str, Var] = {v.name: v for v in _VARS}
# The flags whose variables are read only when the flag is absent, spelled as on the command line.
FLAGS: dict[str, Var] = {v.flag: v for v in _VARS if v.flag}


# Every option the parser takes: the declared flags and -h/--help (tests/test_trainer_contract.py holds this to
# trainer/cli.py's parser). A BOOL flag's value is optional (`--channels-last` alone is true); argparse also takes an
# unambiguous prefix of an option (allow_abbrev) and no positional argument.
OPTIONS: tuple[str, ...] = ("-h", "--help", *FLAGS)
OPTIONAL_VALUE = frozenset(flag for flag, var in FLAGS.items() if var.kind == BOOL)


def _option(name: str) -> tuple[str | None, str | None]:
    """(the option argparse takes `name` for, why it refuses it): an exact option or a unique prefix of one."""
    if name in OPTIONS:
        return name, None
    found = [o for o in OPTIONS if o.startswith("--") and name.startswith("--") and o.startswith(name)]
    if len(found) == 1:
        return found[0], None
    if found:
        return None, f"ambiguous option: {name} could match {', '.join(found)}"
    return None, f"unrecognized argument {name}"


def refused(args: list[str]) -> list[tuple[int, str, str]]:
    """(index, the argument as written, why) for every argument of the trainer's own that its parser refuses, as
    argparse does: an unknown option, an ambiguous prefix, a positional argument (it takes none), `--help` (usage,
    exit 0, no training). Every such run exits 2 on every rank before training. An argument the manifest does not
    resolve (`$(VAR)`) is left alone, and so is the value after an unknown option (argparse reports both as one)."""
    out: list[tuple[int, str, str]] = []
    i = 0
    while i < len(args):
        tok = str(args[i])
        if "$" in tok:
            i += 1
            continue
        if tok == "--":
            out += [(j, str(a), "a positional argument (after --)") for j, a in enumerate(args[i + 1:], i + 1)
                    if "$" not in str(a)]
            break
        if not tok.startswith("-") or tok == "-" or tok[1:2].isdigit():
            out.append((i, tok, "a positional argument (train.py takes none)"))
            i += 1
            continue
        name, eq, _ = tok.partition("=")
        option, why = _option(name)
        if option is None:
            out.append((i, name, why or "unrecognized argument"))
            i += 1 if eq or i + 1 >= len(args) or str(args[i + 1]).startswith("-") else 2
            continue
        if option in ("-h", "--help"):
            out.append((i, name, "--help prints the usage and exits 0: the run never trains"))
            i += 1
            continue
        if eq or (option in OPTIONAL_VALUE and (i + 1 >= len(args) or str(args[i + 1]).startswith("-"))):
            i += 1
        elif option in OPTIONAL_VALUE:  # argparse takes the next word as the value, and refuses one not true/false
            value = str(args[i + 1])
            why = None if "$" in value else FLAGS[option].refuses(value)
            if why:
                out.append((i + 1, value, f"not a value of {option} ({why}), and train.py takes no positional "
                                          "argument"))
            i += 2
        else:
            i += 2
    return out


def starts_trainer(argv: list[str]) -> int | None:
    """Where the trainer's own arguments begin in a container's command + args (after `/app/trainer/train.py` or
    `-m trainer.train`), or None when the container does not start it."""
    for i, tok in enumerate(argv):
        if tok == SCRIPT:
            return i + 1
        if tok == "-m" and i + 1 < len(argv) and argv[i + 1] == MODULE:
            return i + 2
    return None


def flags_given(args: list[str]) -> set[str]:
    """The contract's flags present in the trainer's arguments (`--backend gloo` or `--backend=gloo`)."""
    return {flag for tok in args if (flag := tok.partition("=")[0]) in FLAGS}
