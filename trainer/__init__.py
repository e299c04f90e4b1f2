"""Distributed (torchrun + DDP) trainer that every launcher in this repository starts.

Entry point: ``torchrun <flags> trainer/train.py --task synthetic ...`` (``/app/trainer/train.py`` in the image).
"""
