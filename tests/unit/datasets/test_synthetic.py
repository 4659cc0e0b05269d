import pytest

from lethe_core.datasets import generate_synthetic, load_dataset


def test_seeded_and_sized():
    a, b = generate_synthetic(3000, seed=1), generate_synthetic(3000, seed=1)
    assert a.fingerprint == b.fingerprint
    assert generate_synthetic(3000, seed=2).fingerprint != a.fingerprint
    assert len(a.corpus) == 3000 and len(generate_synthetic(100).corpus) == 100
    assert load_dataset("synthetic:500").describe()["turns"] == 500


def test_planted_ground_truth_is_consistent():
    ds = generate_synthetic(4000, seed=3)
    distractors = ds.annotations["distractors"]
    assert len(distractors) == 2 * ds.annotations["families"]
    for q in ds.queries:
        (needle,) = q.qrels
        assert needle in ds.corpus.index and needle not in distractors
        family = int(q.qtype.split("-")[1])
        # The family's distractors share the query's words but never hold the answer.
        mine = [t for t, f in distractors.items() if f == family]
        q_words = set(q.text.split()[2:])
        for t in mine:
            assert q_words <= set(ds.corpus[ds.corpus.index[t]].text.split())
    sessions = {t.session_id for t in ds.corpus.turns}
    assert len(sessions) > 100
    stamps = [t.timestamp for t in ds.corpus.turns]
    assert stamps == sorted(stamps)


def test_size_bounds():
    with pytest.raises(ValueError):
        generate_synthetic(10)


@pytest.mark.parametrize("name", ["synthetic:abc", "synthetic:-5", "synthetic:50", "synthetic:", "synthetic:2000000", "synthetics"])
def test_bad_synthetic_names_give_the_allowed_form(name):
    with pytest.raises(ValueError, match=r"expected synthetic\[:N\] .*100 <= N <= 1,000,000"):
        load_dataset(name)
