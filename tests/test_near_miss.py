"""TRAINER002's edit distance (optimal string alignment) and its bound: the bound only stops early, it never
changes an answer within it."""
from __future__ import annotations

import itertools
import random

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


def _every_name_read(name, read):
    """near_miss as its docstring says it, the slow way: every name read, in sorted order, its distance in full."""
    best = None
    for known in sorted(read):
        if len(known) < 4 or known == name:
            continue
        if known.lower() == name.lower():
            return known
        limit = 1 if len(known) <= 8 else 2
        d = distance(name.upper(), known)
        if d <= limit and (best is None or d < best[0]):
            best = (d, known)
    return best[1] if best else None


def test_the_index_of_names_read_gives_what_comparing_every_name_gives():
    """near_miss looks only at the names that share a deletion with the variable: the same answer as comparing it
    with every name read, over names of few letters (many near each other, ties, another case, swaps)."""
    rnd = random.Random(34)
    letters = "ABab_"
    for _ in range(400):
        read = {"".join(rnd.choice(letters) for _ in range(rnd.randint(2, 11))) for _ in range(rnd.randint(0, 30))}
        for _ in range(20):
            word = list(rnd.choice(sorted(read))) if read and rnd.random() < 0.6 else []
            for _ in range(rnd.randint(0, 3)):
                i = rnd.randrange(len(word) + 1)
                if rnd.random() < 0.5:
                    word.insert(i, rnd.choice(letters))
                elif i + 1 < len(word):
                    word[i], word[i + 1] = word[i + 1], word[i]
            name = "".join(word) if rnd.random() < 0.8 else "".join(word).lower()
            assert near_miss(name, read) == _every_name_read(name, read), (name, sorted(read))
