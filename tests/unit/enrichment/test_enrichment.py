from datetime import date, datetime
from pathlib import Path

import pytest

from lethe_core.datasets.locomo import parse_locomo
from lethe_core.enrichment import (Enrichment, HeuristicEnricher, ObservationEnricher, covered_queries, enrich,
                                   extract_entities, index_text, original_texts, original_view,
                                   resolve_selection, resolve_temporal)
from lethe_core.experiments.enrichment_study import pool_builder
from lethe_core.retrieval.pipeline import PipelineConfig

MONDAY = datetime(2023, 5, 8, 13, 56)  # LoCoMo conv-26's first session date


def values(text, when=MONDAY):
    return {m.phrase: m.value for m in resolve_temporal(text, when)}


# ---- temporal markers ------------------------------------------------------------------------------------

def test_relative_days_and_weeks():
    v = values("I went yesterday, I go today and tomorrow; the day before yesterday too.")
    assert v["yesterday"].startswith("2023-05-07") and "7 May 2023" in v["yesterday"]
    assert v["today"].startswith("2023-05-08") and v["tomorrow"].startswith("2023-05-09")
    assert v["the day before yesterday"].startswith("2023-05-06")
    assert values("last week")["last week"] == "2023-05-01..2023-05-07"
    assert values("next week")["next week"] == "2023-05-15..2023-05-21"
    assert values("last weekend")["last weekend"] == "2023-05-06..2023-05-07"
    assert values("this weekend")["this weekend"] == "2023-05-13..2023-05-14"


def test_months_years_and_offsets():
    assert values("last month")["last month"] == "2023-04"
    assert values("next month")["next month"] == "2023-06"
    assert values("next month", datetime(2023, 12, 3))["next month"] == "2024-01"
    assert values("last year")["last year"] == "2022"
    assert values("two weeks ago")["two weeks ago"].startswith("2023-04-24")
    assert values("3 months ago")["3 months ago"] == "2023-02"
    assert values("a few ideas, a year ago")["a year ago"] == "2022"
    assert values("in 2 days")["in 2 days"].startswith("2023-05-10")


def test_weekdays_follow_tense():
    v = values("We met last Friday, and I will see her on Friday.")
    assert v["last Friday"].startswith("2023-05-05")
    assert v["Friday"].startswith("2023-05-12")  # future tense -> the coming Friday
    assert values("I painted on Saturday.")["Saturday"].startswith("2023-05-06")
    assert values("next Monday")["next Monday"].startswith("2023-05-15")
    assert values("I ran on Monday.")["Monday"].startswith("2023-05-01")  # strictly before the session date


def test_explicit_month_names_and_years():
    assert values("I was in Paris on 7 May 2023.")["7 May 2023"].startswith("2023-05-07")
    assert values("on May 7, 2022 we moved")["May 7, 2022"].startswith("2022-05-07")
    assert values("in March 2021 I started")["March 2021"] == "2021-03"
    assert values("In July I painted a lake.")["July"] == "2022-07"  # past tense, July not reached yet in May 2023
    assert values("In July I'm going to Spain.")["July"] == "2023-07"
    assert values("Back in April I ran.")["April"] == "2023-04"
    assert values("last May")["last May"] == "2022-05"
    assert values("since 2019 I run")["2019"] == "2019"
    assert values("I may go, and we march on.") == {}  # the verbs are not months
    assert "31 February" not in values("it was 31 February")  # impossible date: no day value
    assert resolve_temporal("yesterday", None) == []
    assert values("yesterday", date(2023, 1, 1))["yesterday"].startswith("2022-12-31")


# ---- entities --------------------------------------------------------------------------------------------

def test_entities_from_capitals_and_speakers():
    ents = extract_entities("Yesterday I met melanie at the Museum of Modern Art in New York. The Beatles played. "
                            "On Friday we saw Oscar.", {"Caroline", "Melanie"})
    assert ents[0] == "Melanie"  # a known speaker, in any case
    assert {"Museum of Modern Art", "New York", "Beatles", "Oscar"} <= set(ents)
    assert not {"Yesterday", "I", "The", "Friday", "On"} & set(ents)
    assert extract_entities("Wow! Great news.") == []
    assert extract_entities("I love Paris's cafes") == ["Paris"]


# ---- a tiny LoCoMo ---------------------------------------------------------------------------------------

def tiny_locomo():
    def session(prefix, lines):
        return [{"speaker": s, "dia_id": f"{prefix}:{i + 1}", "text": t} for i, (s, t) in enumerate(lines)]

    conv = {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": session("D1", [("Caroline", "I went to a support group yesterday."),
                                    ("Melanie", "That sounds great. I painted a lake sunrise last year.")]),
        "session_2_date_time": "1:14 pm on 25 May, 2023",
        "session_2": session("D2", [("Melanie", "We went camping with the kids last week."),
                                    ("Caroline", "I am reading a book about Ireland.")]),
        "session_3_date_time": "7:55 pm on 9 June, 2023",
        "session_3": session("D3", [("Caroline", "I will visit Sweden next month."),
                                    ("Melanie", "Enjoy it!")]),
    }
    qa = [{"question": "When did Caroline go to the support group?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
          {"question": "Where will Caroline travel?", "answer": "Sweden", "evidence": ["D3:1"], "category": 4}]
    obs = {"session_1_observation": {"Caroline": [["Caroline attended an LGBTQ support group.", "D1:1"]],
                                     "Melanie": [["Melanie painted a sunrise.", "D1:2"]]},
           "session_2_observation": {"Melanie": [["Melanie camps with her family.", ["D2:1", "D1:2"]]]}}
    data = [{"sample_id": "conv-1", "conversation": conv, "qa": qa, "observation": obs}]
    return parse_locomo(data, Path("tiny.json"), name="tiny")


@pytest.fixture
def tiny():
    return tiny_locomo()


def test_observations_attach_to_the_turns_they_cite(tiny):
    e = ObservationEnricher.from_dataset(tiny)
    assert e.facts_by_turn["conv-1:D1:1"] == ["Caroline attended an LGBTQ support group."]
    assert e.facts_by_turn["conv-1:D1:2"] == ["Melanie painted a sunrise.", "Melanie camps with her family."]
    assert e.facts_by_turn["conv-1:D2:1"] == ["Melanie camps with her family."]
    out = enrich(tiny, e)
    texts = dict(zip(out.corpus.ids, out.corpus.texts))
    assert texts["conv-1:D1:1"] == "Caroline: I went to a support group yesterday.\nCaroline attended an LGBTQ support group."
    assert texts["conv-1:D3:2"] == "Melanie: Enjoy it!"  # cited by no observation: unchanged
    assert out.annotations["enrichment"]["enriched"] == 3
    assert e.coverage(tiny) == pytest.approx(0.5)


def test_enrich_keeps_ids_queries_and_originals(tiny):
    out = enrich(tiny, HeuristicEnricher.from_dataset(tiny))
    assert out.corpus.ids == tiny.corpus.ids and out.queries == tiny.queries
    assert [t.session_id for t in out.corpus.turns] == [t.session_id for t in tiny.corpus.turns]
    assert original_texts(out) == tiny.corpus.texts and original_texts(tiny) == tiny.corpus.texts
    assert original_view(out).corpus.texts == tiny.corpus.texts and original_view(out).name == out.name
    first = out.corpus.texts[0]
    assert first.startswith("Caroline: I went to a support group yesterday.\n")
    assert "Time: yesterday: 2023-05-07 (7 May 2023)" in first
    assert "Entities:" not in first  # the speaker prefix is not an entity mention (it is in the text already)
    assert "Sweden" in out.annotations["enrichment"]["fields"]["conv-1:D3:1"]["entities"]
    assert out.name != tiny.name and out.name.startswith("tiny+enrich-heuristic-all-")
    assert out.fingerprint != tiny.fingerprint
    with pytest.raises(ValueError, match="already enriched"):
        enrich(out, HeuristicEnricher.from_dataset(tiny))


def test_index_text_layout():
    e = Enrichment("A gist.", ("Q1?", "Q2?"), ("Ann", "Oslo"), ("yesterday: 2023-05-07",))
    assert index_text("Ann: hi", e) == "Ann: hi\nA gist.\nQ1? Q2?\nEntities: Ann; Oslo\nTime: yesterday: 2023-05-07"
    assert index_text("x", Enrichment()) == "x"
    assert Enrichment.from_dict({"gist": " g ", "entities": "Ann"}) == Enrichment("g", (), ("Ann",), ())


def test_selectors_leak_and_its_blind_twin(tiny):
    _, leak = resolve_selection(tiny, "relevant_sessions")
    assert leak == {"conv-1:D1:1", "conv-1:D1:2", "conv-1:D3:1", "conv-1:D3:2"}  # sessions 1 and 3 hold qrels
    sessions = {tiny.corpus[tiny.corpus.index[i]].session_id for i in leak}
    for seed in range(6):
        label, twin = resolve_selection(tiny, "random_sessions", seed)
        assert label == f"random_sessions-s{seed}"
        assert len({tiny.corpus[tiny.corpus.index[i]].session_id for i in twin}) == len(sessions)
        assert twin == resolve_selection(tiny, "random_sessions", seed)[1]  # seeded
    assert len({frozenset(resolve_selection(tiny, "random_sessions", s)[1]) for s in range(12)}) > 1
    assert resolve_selection(tiny, None)[1] == set(tiny.corpus.ids)
    with pytest.raises(ValueError, match="unknown selector"):
        resolve_selection(tiny, "gold")
    with pytest.raises(ValueError, match="not in the corpus"):
        resolve_selection(tiny, ["nope"])
    out = enrich(tiny, HeuristicEnricher.from_dataset(tiny), select="relevant_sessions")
    assert out.annotations["enrichment"]["leaky"] and set(out.annotations["enrichment"]["enriched_ids"]) <= leak
    assert out.corpus.texts[2] == tiny.corpus.texts[2]  # session 2 is not selected
    assert covered_queries(out) == ["conv-1:q0", "conv-1:q1"]
    twin = enrich(tiny, HeuristicEnricher.from_dataset(tiny), select="random_sessions", seed=1)
    assert not twin.annotations["enrichment"]["leaky"] and twin.name != out.name


class RecordingReranker:
    name = "test:recording"

    def __init__(self):
        self.seen = []

    def score(self, query, texts):
        import numpy as np

        self.seen.extend(texts)
        return np.arange(len(texts), dtype=np.float32)[::-1].copy()


def test_pool_builder_retrieves_enriched_but_reranks_original(tiny, tmp_path):
    # "Sweden" is reachable by BM25 only through the anticipated query written into the index text
    class Fixed:
        name = "fixed"

        def enrich_turn(self, turn, session_date):
            return Enrichment(anticipated_queries=("zanzibar holiday plans?",)) if turn.id == "conv-1:D3:1" else Enrichment()

    out = enrich(tiny, Fixed())
    query = tiny.queries[0].__class__(id="zq", text="zanzibar", qrels={"conv-1:D3:1": 1}, conversation_id="conv-1")
    out = out.__class__(**{**out.__dict__, "queries": [query]})
    reranker = RecordingReranker()
    builder = pool_builder(out, reranker, PipelineConfig(encoder="test:hash"), root=tmp_path, progress=False)
    assert builder.directory.parent.name == out.name
    pools = builder.build()
    frame = pools.frame
    assert "conv-1:D3:1" in set(frame[frame["bm25_rank"] >= 0]["doc_id"])  # found via the enrichment
    assert reranker.seen and all("zanzibar" not in t for t in reranker.seen)  # the reranker read originals only
    assert "Caroline: I will visit Sweden next month." in reranker.seen


def test_evaluate_arms_on_synthetic(tmp_path):
    from lethe_core.experiments.enrichment_study import evaluate_arms
    from lethe_core.experiments.setup import DataSpec

    data = DataSpec("synthetic:300", reranker="test:lexical", backend="torch", pipeline=PipelineConfig(encoder="test:hash"),
                    progress=False)
    out = evaluate_arms(data, seeds=2, leak_enricher="heuristic", root=tmp_path)
    per = out["per_query"]
    assert set(per["arm"]) == {"none", "heuristic", "leak", "twin-s0", "twin-s1", "twin"}  # no observations here
    n = out["n_queries"]
    assert all((per["arm"] == a).sum() == n for a in set(per["arm"]))
    assert per["ndcg@10"].between(0, 1).all()
    names = [a["dataset"] for a in out["arms"]]
    assert len(set(names)) == len(names)  # every arm has its own pool folder
    with pytest.raises(ValueError, match="leak_enricher"):
        evaluate_arms(data, seeds=1, root=tmp_path)


def test_capped_leak_and_its_twin(tiny):
    _, leak = resolve_selection(tiny, "relevant_sessions", max_turns=3)
    assert leak == {"conv-1:D1:1", "conv-1:D1:2"}  # whole sessions in corpus order within the budget
    for seed in range(4):
        label, twin = resolve_selection(tiny, "random_sessions", seed, max_turns=3)
        assert label == f"random_sessions-s{seed}-max3"
        assert len({tiny.corpus[tiny.corpus.index[i]].session_id for i in twin}) == 1
    out = enrich(tiny, HeuristicEnricher.from_dataset(tiny), select="relevant_sessions", max_turns=3)
    info = out.annotations["enrichment"]
    assert (info["selected"], info["selected_sessions"], info["max_turns"]) == (2, 1, 3)
    assert covered_queries(out) == ["conv-1:q0"]
    with pytest.raises(ValueError, match="session selectors"):
        resolve_selection(tiny, "all", max_turns=3)
