"""Which samples each rank trains on: the index arithmetic of torch's DistributedSampler, without a DataLoader.

Every rank draws the same permutation from (seed, epoch) -- the `set_epoch` semantics -- pads it by
wrapping around to a multiple of the world size, and takes every world-size-th index from its rank on.
So the shards of one epoch are disjoint when the world size divides the sample count (otherwise exactly
`padding` samples appear twice), they cover the data, and every rank runs the same number of steps.
"""

from __future__ import annotations

import hashlib
import math

import torch


def padded_size(n: int, world_size: int) -> int:
    return math.ceil(n / world_size) * world_size


def shard_indices(n: int, rank: int, world_size: int, epoch: int, seed: int, shuffle: bool = True) -> torch.Tensor:
    """Indices (int64, CPU) of the samples that `rank` trains on in `epoch`."""
    if n <= 0:
        raise ValueError("cannot shard an empty dataset")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} outside world of {world_size}")
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g)
    else:
        order = torch.arange(n)
    total = padded_size(n, world_size)
    if total > n:
        reps = math.ceil((total - n) / n)
        order = torch.cat([order, order.repeat(reps)[: total - n]])
    return order[rank:total:world_size]


def eval_indices(n: int, rank: int, world_size: int) -> torch.Tensor:
    """Validation shard: strided, no padding, so the all-reduced sums count every sample exactly once."""
    return torch.arange(rank, n, world_size)


def digest(indices: torch.Tensor) -> str:
    """Order-independent fingerprint of a shard, for logs and the shard records."""
    return hashlib.sha256(torch.sort(indices.cpu().to(torch.int64)).values.numpy().tobytes()).hexdigest()[:16]
