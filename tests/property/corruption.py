"""Hypothesis strategies that corrupt a valid JSON-shaped fixture, shared by the property suites.

A corruption is a few edits of the parsed tree (delete a key or item, replace a value with a wrong type,
NaN, a bool or a huge number, duplicate a list item, which duplicates ids) and, optionally, one edit of
the serialised bytes (truncate, or insert invalid UTF-8, a 5,000-digit number, very deep nesting).
"""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Few examples, no deadline: each example writes and loads files, on a loaded 2-core machine.
PROPERTY_SETTINGS = settings(max_examples=80, deadline=None, database=None,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

BAD_VALUES = st.sampled_from([None, True, False, 0, -1, 7.5, 10**400, 1e308, float("nan"), float("inf"), float("-inf"),
                              "", "x", "4", "D99:99", [], [1], {}, {"a": 1}])
BAD_BYTES = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"NaN", b"1" * 5000, b"[" * 50_000, b"\n", b"\t"])


def paths(tree, prefix=()) -> list[tuple]:
    """Every node's path (root included), so edits reach leaves as often as whole records."""
    out = [prefix]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += paths(v, prefix + (k,))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += paths(v, prefix + (i,))
    return out


def _apply(tree, path: tuple, op: str, value):
    """One edit; an edit whose path an earlier edit removed is skipped. Returns the (possibly new) root."""
    if not path:
        return value if op == "replace" else tree
    parent = tree
    for key in path[:-1]:
        try:
            parent = parent[key]
        except (KeyError, IndexError, TypeError):
            return tree
    key = path[-1]
    if isinstance(parent, dict) and key in parent:
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = value
    elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        if op == "delete":
            parent.pop(key)
        elif op == "replace":
            parent[key] = value
        else:
            parent.insert(key, copy.deepcopy(parent[key]))
    return tree


@st.composite
def tree_edits(draw, tree):
    """A deep copy of `tree` with 0-3 edits."""
    tree = copy.deepcopy(tree)
    candidates = paths(tree)
    for _ in range(draw(st.integers(0, 3))):
        tree = _apply(tree, draw(st.sampled_from(candidates)), draw(st.sampled_from(["delete", "replace", "duplicate"])),
                      draw(BAD_VALUES))
    return tree


@st.composite
def byte_edit(draw, raw: bytes) -> bytes:
    """`raw` unchanged, truncated, or with a bad byte sequence inserted at a random offset."""
    op = draw(st.sampled_from(["none", "none", "truncate", "insert"]))
    at = draw(st.integers(0, len(raw)))
    if op == "truncate":
        return raw[:at]
    if op == "insert":
        return raw[:at] + draw(BAD_BYTES) + raw[at:]
    return raw


@st.composite
def corrupted_json(draw, tree) -> bytes:
    """The serialised bytes of a corrupted copy of `tree` (Python's json writes NaN/Infinity bare, as a user's tool might)."""
    return draw(byte_edit(json.dumps(draw(tree_edits(tree)), indent=1).encode()))
