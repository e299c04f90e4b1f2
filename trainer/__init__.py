"""Distributed (torchrun + DDP or FSDP2) trainer that every launcher in this repository starts.

Entry point: ``torchrun <flags> trainer/train.py --task synthetic ...`` (``/app/trainer/train.py`` in the image).
The command line is trainer/cli.py, the one training loop trainer/loop.py, the tasks trainer/tasks/, the checkpoints
trainer/checkpoint/; docs/trainer.md describes them.
"""
