"""locomo-haystack: LoCoMo inside seeded whole chit-chat conversations (docs/haystack.md)."""

import sys
from datetime import datetime
from pathlib import Path

import pytest

from lethe_core.datasets import DatasetError, Turn, load_dataset
from lethe_core.datasets.haystack import (
    HaystackConfig, build_haystack, duplicate_report, duplicate_share, is_filler, load_chitchat, parse_haystack_name,
)
from lethe_core.datasets.model import Corpus
from lethe_core.retrieval.text import tokenize

SMALL = 8000


@pytest.fixture(scope="module")
def chitchat():
    return load_chitchat()


@pytest.fixture(scope="module")
def small(locomo, chitchat):
    return build_haystack(locomo, chitchat[0], HaystackConfig(turns=SMALL), chitchat[1])


def _fake(conversations: dict) -> dict:
    """A chit-chat file: uuid -> {"messages": [[{text, timestamp, sender}, ...], ...]}."""
    return {uuid: {"messages": [[{"text": t, "timestamp": f"2018-05-02T19:{i:02d}:00Z", "sender": s} for t in texts]
                                for i, (s, texts) in enumerate(turns)]}
            for uuid, turns in conversations.items()}


def test_two_loads_give_the_same_corpus():
    a, b = load_dataset(f"locomo-haystack:{SMALL}"), load_dataset(f"locomo-haystack:{SMALL}")
    assert a.require_corpus().ids == b.require_corpus().ids
    assert a.fingerprint == b.fingerprint
    assert a.name == f"locomo-haystack-{SMALL}"


def test_n_is_exact_and_smaller_pools_are_prefixes(locomo, chitchat, small):
    assert len(small.corpus) == SMALL
    bigger = build_haystack(locomo, chitchat[0], HaystackConfig(turns=SMALL + 1), chitchat[1])
    assert len(bigger.corpus) == SMALL + 1 and bigger.corpus.ids[:SMALL] == small.corpus.ids
    cut = [i for i in small.issues if i["kind"] == "filler_cut"]
    assert len(cut) == 1 and 0 < cut[0]["kept"] < cut[0]["of"]
    bare = build_haystack(locomo, chitchat[0], HaystackConfig(turns=len(locomo.corpus)), chitchat[1])
    assert bare.corpus.ids == locomo.corpus.ids


def test_locomo_turns_queries_and_qrels_are_untouched(locomo, small):
    n = len(locomo.corpus)
    assert small.corpus.turns[:n] == locomo.corpus.turns
    assert small.queries == locomo.queries and small.extra_queries == locomo.extra_queries
    assert not any(is_filler(t.id) for t in locomo.corpus.turns)
    assert all(is_filler(t.id) for t in small.corpus.turns[n:])


def test_filler_is_never_relevant(small):
    relevant = {d for qs in [small.queries, *small.extra_queries.values()] for q in qs for d in q.qrels}
    assert relevant and not any(is_filler(d) for d in relevant)
    assert relevant <= set(small.corpus.index)


def test_no_id_speaker_or_conversation_collisions(locomo, small):
    n = len(locomo.corpus)
    filler = small.corpus.turns[n:]
    assert not {t.speaker for t in filler} & {t.speaker for t in locomo.corpus.turns}
    assert not {t.conversation_id for t in filler} & set(locomo.conversation_ids())
    assert not {t.session_id for t in filler} & {t.session_id for t in locomo.corpus.turns}
    for t in filler:  # speakers are named per conversation: cc<k>a, cc<k>b (one token each)
        k = t.conversation_id.removeprefix("cc-")
        assert t.speaker in (f"cc{k}a", f"cc{k}b") and t.text.startswith(f"{t.speaker}: ")
        assert tokenize(t.text)[0] == t.speaker
        assert t.session_id == f"{t.conversation_id}:S1" and t.id == f"{t.conversation_id}:t{t.position}"
        assert t.timestamp.tzinfo is None and t.timestamp.year == 2018


def test_full_sizes_and_granularity(locomo, chitchat):
    turn = build_haystack(locomo, chitchat[0], HaystackConfig(), chitchat[1])
    msg = build_haystack(locomo, chitchat[0], HaystackConfig(granularity="message"), chitchat[1])
    n = len(locomo.corpus)
    # 138,737 turns / 258,145 messages in the package; 12 turns (33 messages) are empty and dropped.
    assert (len(turn.corpus) - n, len(msg.corpus) - n) == (138_725, 258_112)
    assert turn.describe()["conversations"] == msg.describe()["conversations"] == 10 + 7168
    assert turn.describe()["sessions"] == 272 + 7168
    assert msg.name == "locomo-haystack-msg" and msg.corpus.turns[n].id.endswith(":m0")
    # The same conversations in the same order: joining a conversation's messages gives its turns.
    first = [t for t in msg.corpus.turns[n:n + 400] if t.conversation_id == "cc-0"]
    joined = [t for t in turn.corpus.turns[n:n + 400] if t.conversation_id == "cc-0"]
    assert len(first) > len(joined) and {t.speaker for t in first} == {t.speaker for t in joined}


def test_fingerprint_changes_with_size_granularity_and_seed(locomo, chitchat, small):
    msg = build_haystack(locomo, chitchat[0], HaystackConfig(turns=SMALL, granularity="message"), chitchat[1])
    other_seed = build_haystack(locomo, chitchat[0], HaystackConfig(turns=SMALL, seed=1), chitchat[1])
    bigger = build_haystack(locomo, chitchat[0], HaystackConfig(turns=SMALL + 1), chitchat[1])
    assert len({small.fingerprint, msg.fingerprint, other_seed.fingerprint, bigger.fingerprint}) == 4
    assert len({small.name, msg.name, other_seed.name, bigger.name}) == 4


def test_conversation_restriction_keeps_locomo_first(small):
    ids = small.conversation_ids()
    assert ids[:10] == [f"conv-{i}" for i in (26, 30, 41, 42, 43, 44, 47, 48, 49, 50)]
    two = small.restrict_conversations(ids[:2])
    assert {t.conversation_id for t in two.corpus.turns} == set(ids[:2]) and two.queries
    only_filler = small.restrict_conversations(ids[10:12])
    assert len(only_filler.corpus) and not only_filler.queries
    assert len(small.limit_queries(5).queries) == 5 and len(small.limit_queries(5).corpus) == SMALL


def test_names_and_bad_sizes(locomo, chitchat):
    assert parse_haystack_name("locomo-haystack") == HaystackConfig()
    assert parse_haystack_name("locomo-haystack-msg:9000") == HaystackConfig(turns=9000, granularity="message")
    with pytest.raises(ValueError, match="expected locomo-haystack"):
        parse_haystack_name("locomo-haystack:lots")
    with pytest.raises(ValueError, match="at least LoCoMo's 5,882 turns"):
        build_haystack(locomo, chitchat[0], HaystackConfig(turns=100), chitchat[1])
    data = _fake({"u1": [("x", ["hi"]), ("y", ["hello"])]})
    with pytest.raises(ValueError, match="the full haystack holds 5,884 turns at message granularity"):
        build_haystack(locomo, data, HaystackConfig(turns=5885, granularity="message"), Path("fake.json"))


def test_turn_text_joins_a_senders_messages_and_skips_empty_ones(locomo):
    data = _fake({"u1": [("x", ["Hello", "how are you?"]), ("y", ["  ", "fine"]), ("x", [""])]})
    ds = build_haystack(locomo, data, HaystackConfig(), Path("fake.json"))
    filler = ds.corpus.turns[len(locomo.corpus):]
    assert [t.text for t in filler] == ["cc0a: Hello how are you?", "cc0b: fine"]
    assert filler[1].timestamp == datetime(2018, 5, 2, 19, 1)
    assert {"kind": "filler_empty_messages", "messages": 2} in ds.issues
    msg = build_haystack(locomo, data, HaystackConfig(granularity="message"), Path("fake.json"))
    assert [t.text for t in msg.corpus.turns[len(locomo.corpus):]] == ["cc0a: Hello", "cc0a: how are you?", "cc0b: fine"]


def test_a_malformed_record_names_file_record_and_field(locomo):
    data = _fake({"u1": [("x", ["hi"])]})
    del data["u1"]["messages"][0][0]["sender"]
    with pytest.raises(DatasetError, match=r"fake.json, record u1 messages\[0\]\[0\], field 'sender': missing"):
        build_haystack(locomo, data, HaystackConfig(), Path("fake.json"))


def test_a_lone_surrogate_in_filler_text_names_the_conversation(locomo):
    data = _fake({"u1": [("x", ["fine"]), ("y", ["bad \ud800"])]})
    with pytest.raises(DatasetError, match=r"fake.json, record u1, field 'messages': lone surrogate \\ud800 at character 4"):
        build_haystack(locomo, data, HaystackConfig(), Path("fake.json"))


def test_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "chitchat_dataset", None)  # makes `import chitchat_dataset` raise ImportError
    with pytest.raises(DatasetError, match=r"pip install chitchat-dataset==0\.9\.0"):
        load_dataset("locomo-haystack:6000")


def test_duplicate_report_and_top_k_share():
    def turn(tid, speaker, text):
        return Turn(tid, f"{speaker}: {text}", tid.rsplit(":", 1)[0], tid.split(":")[0], speaker=speaker)

    corpus = Corpus([
        turn("conv-1:D1:1", "Ann", "hi"),  # LoCoMo text equal to a filler one: it makes that filler turn a duplicate
        turn("cc-0:t0", "cc0a", "hi"), turn("cc-0:t1", "cc0b", "lol"), turn("cc-1:t0", "cc1a", "lol"),
        turn("cc-1:t1", "cc1b", "I climbed a hill"), turn("cc-2:t0", "cc2a", "lol"),
    ])
    report = duplicate_report(corpus)
    assert (report.filler_turns, report.duplicated_turns, report.distinct_texts) == (5, 4, 2)
    assert report.duplicate_ids == {"cc-0:t0", "cc-0:t1", "cc-1:t0", "cc-2:t0"}
    assert report.most_common[0] == ("lol", 3) and report.as_dict()["share"] == pytest.approx(0.8)
    share = duplicate_share([["cc-0:t1", "conv-1:D1:1", "cc-1:t1"], ["cc-1:t1"], ["cc-2:t0", "cc-0:t0"]],
                            report.duplicate_ids, k=2)
    assert share == {"lists": 3, "k": 2, "slots": 5, "duplicate_slots": 3, "share": 0.6, "lists_with_any": 2}
