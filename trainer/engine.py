"""The training step and the validation sums of the classification tasks, shared by the trainer and the benchmark;
the optimiser and how a resumed one keeps this run's hyperparameters.

Nothing here synchronises with the host: losses stay on the device, and callers read them only at their
logging intervals.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

AMP_DTYPES = {"none": None, "bf16": torch.bfloat16}


def autocast(device: torch.device, amp_dtype: torch.dtype | None):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


def configure_device(device: torch.device) -> None:
    """Speed settings for CUDA: cuDNN picks the fastest kernels for the (fixed) input shapes, and float32
    matrix products may use TF32 tensor cores."""
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.set_float32_matmul_precision("high")


def make_optimizer(model: nn.Module, lr: float, device: torch.device, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    # fused AdamW runs the whole update in a few kernels on the GPU
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, fused=device.type == "cuda")


# On resume the optimiser keeps what it learnt about the parameters (per parameter: AdamW's step count and
# both moment estimates) and takes every hyperparameter from this run: `optimizer.load_state_dict` would bring
# back the saved run's lr, weight decay, betas, eps and fused/foreach implementation choice. `amsgrad` stays
# as saved: it decides which state tensors exist.
KEPT_FROM_CHECKPOINT = ("amsgrad",)


def _show(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict) -> list[str]:
    """Load `saved` into `optimizer`, then put back this run's hyperparameters; returns what changed,
    e.g. ["lr 0.003->1e-05", "fused False->True"]."""
    return keep_hyperparameters(optimizer, lambda: optimizer.load_state_dict(saved))


def keep_hyperparameters(optimizer: torch.optim.Optimizer, load: Callable[[], None]) -> list[str]:
    """Run `load` (which brings back a saved optimiser state, hyperparameters included: load_state_dict, or DCP's
    set_state_dict), then put back this run's hyperparameters; returns what changed."""
    wanted = [{k: v for k, v in g.items() if k not in ("params", "param_names")} for g in optimizer.param_groups]
    load()
    changes: list[str] = []
    for group, new in zip(optimizer.param_groups, wanted):
        for key, value in new.items():
            if key in KEPT_FROM_CHECKPOINT or group.get(key) == value:
                continue
            change = f"{key} {_show(group.get(key))}->{_show(value)}"
            if change not in changes:
                changes.append(change)
            group[key] = value
        # Where the step count lives depends on the implementation (torch's rule in load_state_dict): on the
        # parameter's device as float32 for fused or capturable AdamW, else on the CPU.
        on_device = bool(group.get("fused") or group.get("capturable"))
        for p in group["params"]:
            st = optimizer.state.get(p, {})
            step = st.get("step")
            if torch.is_tensor(step):
                st["step"] = step.to(dtype=torch.float32, device=p.device if on_device else "cpu")
    return changes


def compile_model(model: nn.Module) -> str:
    """--compile: torch.compile in place (`Module.compile`: the state-dict keys, checkpoints and exports stay as they
    are). A Hugging Face model's transformer blocks (its `_no_split_modules`, the FSDP units of trainer/fsdp.py) are
    compiled one by one: identical blocks share one compiled graph, and under DDP or FSDP2 each block's gradients are
    ready, and reduced, as soon as its backward graph ends (one graph for the whole model would hold every reduction
    until the end of the backward pass); FSDP2's hooks stay outside the compiled code. A model without such blocks
    (the classification tasks') is compiled whole. Compilation itself happens at the first step. Returns what was
    compiled, for the [DDP] line."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        model.compile()
        return "model"
    for block in blocks:
        block.compile()
    return f"{len(blocks)} blocks"


def prepare_model(model: nn.Module, device: torch.device, channels_last: bool) -> nn.Module:
    model = model.to(device)
    # Module.to takes memory_format at run time (torch._C._nn._parse_to); torch's overloads of it leave it out.
    return model.to(memory_format=torch.channels_last) if channels_last else model  # type: ignore[call-overload]


def batch_slices(count: int, batch_size: int, start_batch: int = 0) -> Iterator[tuple[int, slice]]:
    """(batch number, slice into the shard) from batch `start_batch` on; the last batch may be short."""
    for i in range(start_batch, (count + batch_size - 1) // batch_size):
        yield i, slice(i * batch_size, min((i + 1) * batch_size, count))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
               amp_dtype: torch.dtype | None, channels_last: bool = False) -> torch.Tensor:
    """One optimiser step; returns the batch's mean loss as a detached float32 device scalar."""
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    optimizer.zero_grad(set_to_none=True)
    with autocast(x.device, amp_dtype):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach().float()


@torch.no_grad()
def eval_sums(model: nn.Module, x: torch.Tensor, y: torch.Tensor, amp_dtype: torch.dtype | None,
              channels_last: bool = False) -> torch.Tensor:
    """Sums over one validation batch: tensor([loss_sum, correct, count]) on the device.

    Sums, not means, so that an all-reduce gives the exact figures over the whole validation set.
    """
    if channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    with autocast(x.device, amp_dtype):
        logits = model(x)
    return torch.stack([F.cross_entropy(logits.float(), y, reduction="sum").double(),
                        (logits.argmax(dim=1) == y).sum().double(),
                        torch.tensor(float(y.numel()), device=x.device, dtype=torch.float64)])
