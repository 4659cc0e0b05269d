"""The synthetic episodic benchmark of checkpoint 15 (lethe_core.datasets.episodic)."""

from __future__ import annotations

from collections import Counter

import pytest

from lethe_core.datasets.episodic import (MODES, SYNONYMS, EpisodicBenchmark, Event, Query, episodic_benchmark,
                                          swap_synonyms, text_ceiling)


@pytest.fixture(scope="module")
def fixed():
    return episodic_benchmark(42)


@pytest.fixture(scope="module")
def faithful():
    return episodic_benchmark(42, faithful=True)


def test_sizes_types_and_one_query_per_event_and_mode(fixed):
    assert len(fixed.events) == 250 and len(fixed.queries) == 1000
    assert Counter(e.type for e in fixed.events) == {"trip": 65, "meeting": 65, "purchase": 60, "preference": 60}
    per_event = Counter((q.target, q.mode) for q in fixed.queries)
    assert set(per_event.values()) == {1} and len(per_event) == 250 * len(MODES)


def test_seeded_determinism(fixed):
    again = episodic_benchmark(42)
    assert again.events == fixed.events and again.queries == fixed.queries
    other = episodic_benchmark(43)
    assert [e.text for e in other.events] != [e.text for e in fixed.events]


def test_fixed_texts_and_family_keys_are_unique_faithful_ones_are_not(fixed, faithful):
    assert len({e.text for e in fixed.events}) == 250 and not fixed.duplicate_groups()
    assert set(fixed.family_key_sizes().values()) == {5} and len(fixed.family_key_sizes()) == 50
    assert faithful.duplicate_groups()  # the reference's generator repeats texts ...
    assert max(faithful.family_key_sizes().values()) > 5  # ... and merges families under one key
    # Same draws otherwise: every event the fixed generator did not repair has the faithful event's text.
    same = sum(a.text == b.text for a, b in zip(fixed.events, faithful.events))
    assert same == 250 - fixed.repaired and fixed.repaired > 0


def test_siblings_follow_the_variation_rules(fixed):
    by_family: dict[int, list[Event]] = {}
    for e in fixed.events:
        by_family.setdefault(e.family, []).append(e)
    for events in by_family.values():
        base = events[0].attributes
        for e in events[1:]:
            changed = {a for a in base if base[a] != e.attributes[a]}
            if e.type == "preference":
                assert changed == {"reason"}
            else:
                assert changed and changed <= {"trip": {"month", "purpose", "destination"},
                                               "meeting": {"month", "topic", "kind"},
                                               "purchase": {"month", "price", "store"}}[e.type]


def test_synonym_swaps_respect_word_boundaries():
    text = "I had a meeting in Berlin on Monday"
    assert swap_synonyms(text, [("in", "during"), ("on", "upon")]) == "I had a meeting during Berlin upon Monday"
    assert swap_synonyms(text, [("in", "during")], faithful=True) == "I had a meetduringg during Berlduring on Monday"
    assert swap_synonyms("I dislike London", SYNONYMS) == "I dislike London"


def test_paraphrases_of_the_fixed_generator_keep_every_word_intact(fixed, faithful):
    words = {w for e in fixed.events for w in e.text.split()} | {new for _, new in SYNONYMS for new in new.split()}
    for q in fixed.queries:
        if q.mode == "paraphrase":
            assert set(q.text.split()) <= words, q.text
    assert any(q.mode == "paraphrase" and not set(q.text.split()) <= words for q in faithful.queries)


def test_ceiling_on_a_hand_made_ambiguous_case():
    attrs = [{"verb": "like", "object": "tea", "reason": r} for r in ("it calms me", "it is cheaper", "it is healthy")]
    events = tuple(Event(f"e{i}", f"I like tea because {a['reason']}", "preference", 0, "k0", i, a)
                   for i, a in enumerate(attrs))
    events += (Event("e3", "I avoid tea because it is cheaper", "preference", 1, "k1", 0,
                     {"verb": "avoid", "object": "tea", "reason": "it is cheaper"}),)
    partial = tuple(Query(f"q{i}", f"I {e.attributes['verb']} tea", e.id, "partial", ("verb", "object"))
                    for i, e in enumerate(events))
    fragment = (Query("f0", "tea preference", "e0", "fragment", ("object",)),)
    bench = EpisodicBenchmark(events, partial + fragment, seed=0, faithful=False)
    # q0..q2 cannot tell e0, e1, e2 apart (1/3 each); q3's verb singles out e3; "tea" fits all four.
    assert bench.achievable_p1(partial).tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1.0])
    assert bench.achievable_p1(fragment).tolist() == [0.25]
    assert text_ceiling(partial) == pytest.approx(0.5)  # one of the three "I like tea", plus "I avoid tea"


def test_partial_and_fragment_ceilings_are_below_one(fixed):
    modes = fixed.stats()["modes"]
    assert modes["paraphrase"]["ceiling"] == modes["noisy"]["ceiling"] == 1.0
    assert modes["partial"]["ceiling"] < 0.6 and modes["fragment"]["ceiling"] < 0.6
    assert modes["fragment"]["ceiling"] <= modes["fragment"]["text_ceiling"]
