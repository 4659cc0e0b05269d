"""A subset counts its own dropped data (issue 24, finding 1); asking for more conversations than exist is an error
(finding 3)."""

import json

import pytest

from lethe_core.datasets import DatasetError, load_dataset
from lethe_core.datasets.synthetic import generate_synthetic, synthetic_conversations

WHOLE = {"queries_without_qrels": 4, "unresolved_evidence_ids": 3, "normalised_evidence_ids": 6}
KEYS = tuple(WHOLE)


def _counts(ds, whole_file=False):
    d = ds.dropped(whole_file=whole_file)
    return {k: d[k] for k in KEYS}


def test_two_conversations_count_their_own_dropped_data():
    """`--conversations 2` once reported the whole file's 4 / 3 / 6; the two conversations run have 2 / 0 / 1."""
    full = load_dataset("locomo")
    assert _counts(full) == WHOLE and not full.is_subset and "dropped_whole_file" not in full.describe()
    two = load_dataset("locomo", conversations=2)
    assert _counts(two) == {"queries_without_qrels": 2, "unresolved_evidence_ids": 0, "normalised_evidence_ids": 1}
    assert _counts(two, whole_file=True) == WHOLE
    info = two.describe()
    assert info["dropped"] == two.dropped() and {k: info["dropped_whole_file"][k] for k in KEYS} == WHOLE
    json.dumps(info, allow_nan=False)
    # every value of dropped() stays a plain count, as the CLI line and results JSON expect
    assert all(type(v) is int for v in two.dropped().values())
    # the subset's issues are exactly those of its conversations
    kept = set(two.conversation_ids())
    assert {i["conversation"] for i in two.issues} <= kept
    assert sum(i["conversation"] in kept for i in full.issues) == len(two.issues)


def test_all_conversations_count_like_the_whole_file():
    assert _counts(load_dataset("locomo", conversations=10)) == WHOLE


def test_limit_queries_counts_the_questions_up_to_the_last_one_evaluated():
    full = load_dataset("locomo")
    assert _counts(load_dataset("locomo", limit_queries=5)) == dict.fromkeys(KEYS, 0)
    # the cut at query n counts every issue of a question at or before the n-th query in file order
    for n in (5, 150, 600, 1200):
        sub = load_dataset("locomo", limit_queries=n)
        cut = full.order[full.queries[n - 1].id]
        expected = [i for i in full.issues if full.order[i.get("query", i["conversation"])] <= cut]
        assert sub.issues == expected and _counts(sub, whole_file=True) == WHOLE
    assert load_dataset("locomo", limit_queries=10**6).dropped() == full.dropped()


def _conversation(cid, questions):
    return {
        "sample_id": cid,
        "conversation": {"session_1_date_time": "1:56 pm on 8 May, 2023",
                         "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}, {"speaker": "B", "dia_id": "D1:2", "text": "yo"}]},
        "qa": [{"question": f"{cid} {i}?", "answer": "a", "evidence": ev, "category": 4} for i, ev in enumerate(questions)],
    }


def test_subset_counts_on_a_small_file(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([
        _conversation("c1", [["D1:1"], ["D9:9"], ["D01:02"]]),  # q1 dropped (unresolved), q2 normalised
        _conversation("c2", [["D7:7"], ["D1:2"]]),  # q0 dropped
    ]))
    whole = load_dataset("locomo", path)
    assert [q.id for q in whole.queries] == ["c1:q0", "c1:q2", "c2:q1"]
    assert whole.dropped()["queries_without_qrels"] == 2
    one = load_dataset("locomo", path, limit_queries=1)  # c1:q0 only: the dropped c1:q1 comes after it
    assert _counts(one) == dict.fromkeys(KEYS, 0)
    two = load_dataset("locomo", path, limit_queries=2)  # c1:q0 and c1:q2: c1:q1 lies between them
    assert _counts(two) == {"queries_without_qrels": 1, "unresolved_evidence_ids": 1, "normalised_evidence_ids": 1}
    first = load_dataset("locomo", path, conversations=1)
    assert _counts(first) == _counts(two) and _counts(first, whole_file=True) == _counts(whole)
    # a subset of a subset still knows the whole file
    assert _counts(first.limit_queries(1), whole_file=True) == _counts(whole)


def test_more_conversations_than_the_file_has_is_an_error_naming_the_number():
    """`--conversations 1000` on LoCoMo once meant all 10, under a new run id."""
    with pytest.raises(DatasetError, match=r"locomo10\.json: --conversations 1000: locomo has 10 conversations; ask for 1 to 10$"):
        load_dataset("locomo", conversations=1000)
    with pytest.raises(DatasetError, match="--conversations 11: locomo has 10 conversations"):
        load_dataset("locomo", conversations=11)
    with pytest.raises(DatasetError, match="--conversations 3: synthetic-500 has 2 conversations; ask for 1 to 2"):
        load_dataset("synthetic:500", conversations=3)
    assert len(load_dataset("synthetic:500", conversations=2).queries) == len(load_dataset("synthetic:500").queries)


@pytest.mark.parametrize("n", [100, 399, 400, 1000, 2000, 2500, 5000])
def test_synthetic_conversation_count_is_known_without_generating(n):
    assert len(generate_synthetic(n).conversation_ids()) == synthetic_conversations(n)


def test_subset_of_a_loader_without_file_order_keeps_its_queries_issues(locomo):
    from dataclasses import replace

    bare = replace(locomo, order={})
    sub = bare.limit_queries(3)
    kept = {q.id for q in sub.queries}
    assert all(i.get("query") in kept for i in sub.issues)


def test_the_loader_records_file_order(locomo):
    assert locomo.order["conv-26"] == 0 and locomo.order["conv-26:q0"] == 0
    assert locomo.order["conv-30"] == locomo.order["conv-26:q0"] + sum(1 for k in locomo.order if k.startswith("conv-26:q"))
