"""torchtune's `tune run` in a TrainJob (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torchtune.go and
the TrainJob webhook): the model a torchtune runtime serves, and what the webhook refuses about its nodes, LoRA and
config items."""
from __future__ import annotations

from typing import Any

from ..kube.values import as_int, listing, mapping
from .base import Check
from .pods import trainer_gpus_per_node

TORCHTUNE_ENTRYPOINT = ["tune", "run"]
# constants.go (kubeflow/trainer v2.3.0): the pretrained models the torchtune runtimes serve (the model is read from
# the runtime's name, torchtune-<model>-<size>), the one that may span nodes, and the config items the runtime owns.
TORCHTUNE_MODELS = ("llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B")
TORCHTUNE_MULTINODE_MODEL = "llama3_3/70B"
TORCHTUNE_NO_QLORA = "qwen2_5/1.5B"
TORCHTUNE_QLORA_SINGLE_DEVICE_ONLY = ("llama3_2/1B", "llama3_2/3B")
TORCHTUNE_IMMUTABLE = ("output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file")


def torchtune_model(runtime_name: str) -> str:
    """torchtune.go getModelFromRuntimeRef: `torchtune-llama3.2-1b` -> `llama3_2/1B`; "" unless three parts."""
    fields = runtime_name.split("-")
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}" if len(fields) == 3 else ""


def _bool_arg(args: list[Any], item: str) -> bool:
    """torchtune.go isBoolArgEnabled: a `key=value` arg whose key contains `item` and whose value is true."""
    for arg in args:
        name, found, value = str(arg).partition("=")
        if found and item in name and value.strip().lower() == "true":
            return True
    return False


def torchtune_config(trainer: dict[str, Any], model: str, gpus: int) -> tuple[bool, bool, str]:
    """torchtune.go getRecipeAndConfig (and isLoraConfigEnabled, isUseQLoraFinetune): (LoRA, QLoRA, config name)
    from spec.trainer's numNodes, numProcPerNode (`auto` unless set), the GPUs per node and the args."""
    args = listing(trainer.get("args"))
    lora = any("model.lora_attn_modules" in str(a) for a in args)
    qlora = not _bool_arg(args, "model.use_dora") and _bool_arg(args, "model.quantize_base")
    nodes = as_int(trainer.get("numNodes"), 1)
    one_proc = as_int(trainer.get("numProcPerNode")) == 1
    suffix = "_full"
    if nodes == 1 and (one_proc or gpus == 1):
        suffix = "_qlora_single_device" if qlora else "_lora_single_device" if lora else "_full_single_device"
    elif nodes == 1 and qlora:
        suffix = "_qlora"
    elif nodes == 1 and lora:
        suffix = "_lora"
    elif (nodes or 0) > 1:
        suffix = "_full_multinode"
    return lora, qlora, model + suffix


def torchtune_checks(trainer: dict[str, Any], runtime_name: str, runtime_resources: dict[str, Any]) -> list[Check]:
    """torchtune.go validateTorchTune (kubeflow/trainer v2.3.0), run by the TrainJob webhook when the command is
    `tune run` on a torch runtime: a supported model, one node unless it is Llama 3.3 70B, no QLoRA for Qwen and
    QLoRA on one device for Llama 3.2, no LoRA across nodes, none of the runtime's own config items in the args."""
    out: list[Check] = []
    model = torchtune_model(runtime_name)
    refused = "the Trainer's webhook refuses torchtune"
    if model not in TORCHTUNE_MODELS:
        out.append(Check("spec.runtimeRef.name", f"{refused} with model '{model}' (from the runtime's name "
                         f"'{runtime_name}'): it serves {', '.join(TORCHTUNE_MODELS)}",
                         "name a torchtune-<model>-<size> runtime of a supported model"))
    nodes = as_int(trainer.get("numNodes"), 1) or 0
    if nodes > 1 and model != TORCHTUNE_MULTINODE_MODEL:
        out.append(Check("spec.trainer.numNodes", f"numNodes is {nodes}: {refused} on more than one node except for "
                         f"{TORCHTUNE_MULTINODE_MODEL} (here {model})", "set numNodes: 1"))
    res = mapping(trainer.get("resourcesPerNode")) if trainer.get("resourcesPerNode") is not None else \
        runtime_resources
    lora, qlora, config = torchtune_config(trainer, model, trainer_gpus_per_node(res))
    if "_qlora" in config:
        if model == TORCHTUNE_NO_QLORA:
            out.append(Check("spec.runtimeRef.name", f"{refused} QLoRA for {model}", "drop model.quantize_base"))
        if "_qlora_single_device" not in config and model in TORCHTUNE_QLORA_SINGLE_DEVICE_ONLY:
            out.append(Check("spec.trainer.numProcPerNode", f"{refused} QLoRA for {model} on more than one device "
                             "(numProcPerNode must be auto or 1, with one GPU per node)",
                             "set numProcPerNode: 1 and one GPU in resourcesPerNode"))
    if nodes > 1 and (lora or qlora):
        out.append(Check("spec.trainer.numNodes", f"numNodes is {nodes} with LoRA args: {refused} LoRA on more "
                         "than one node", "set numNodes: 1, or drop the LoRA args"))
    for i, arg in enumerate(listing(trainer.get("args"))):
        key = str(arg).split("=", 1)[0]
        if key in TORCHTUNE_IMMUTABLE:
            out.append(Check(f"spec.trainer.args[{i}]", f"'{key}' is set in the args, but the torchtune runtime "
                             "manages it: the Trainer's webhook refuses it",
                             f"remove {key}=... from spec.trainer.args"))
    return out
