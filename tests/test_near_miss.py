"""TRAINER002's edit distance (optimal string alignment) and its bound: the bound only stops early, it never
changes an answer within it."""
from __future__ import annotations

import itertools

from policies.rules.trainer002_env_name_near_miss import distance, near_miss

WORDS = ["".join(p) for n in range(5) for p in itertools.product("ABC", repeat=n)]


def test_known_distances():
    assert distance("NPROC_PER_NOD", "NPROC_PER_NODE") == 1  # a deletion
    assert distance("DIST_BACKND", "DIST_BACKEND") == 1
    assert distance("EPOHCS", "EPOCHS") == 1  # two neighbours swapped: one edit
    assert distance("CA", "ABC") == 3  # optimal string alignment, not Damerau-Levenshtein's 2
    assert distance("", "ABC") == 3 and distance("ABC", "ABC") == 0


def test_a_bound_changes_no_answer_within_it():
    for a, b in itertools.product(WORDS, repeat=2):
        d = distance(a, b)
        for bound in (0, 1, 2):
            bounded = distance(a, b, bound)
            assert bounded == d if d <= bound else bounded > bound, (a, b, bound, d, bounded)


def test_near_miss_takes_the_closest_name_read():
    read = {"NPROC_PER_NODE", "NNODES", "MASTER_PORT", "EPOCHS"}
    assert near_miss("NPROC_PER_NOD", read) == "NPROC_PER_NODE"
    assert near_miss("nnodes", read) == "NNODES"  # another case only
    assert near_miss("EPOHCS", read) == "EPOCHS"
    assert near_miss("MASTER_PRT", read) == "MASTER_PORT"
    assert near_miss("NCCL_DEBUG", read) is None and near_miss("MODEL_PARAMS", read) is None
