"""Tokenizers shared by BM25 and the lexical test reranker (docs/method.md, "First stage").

`tokenize` is the default (`regex`). Named variants, for the tokenizer ablation (checkpoint 8):
- `split`: `text.lower().split()`, the reference's tokenizer before 2026-04-24;
- `regex`: lower-cased `[A-Za-z0-9_]+` tokens, the reference's tokenizer afterwards (the default);
- `regex-stop`: `regex` minus scikit-learn's English stop list (318 words);
- `regex-porter`: `regex` with every token Porter-stemmed (snowballstemmer's "porter" algorithm).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

_TOKEN = re.compile(r"[A-Za-z0-9_]+")
DEFAULT_TOKENIZER = "regex"


def tokenize(text: str) -> list[str]:
    """Lower-cased ASCII word tokens: the reference's regex tokenizer."""
    return _TOKEN.findall(text.lower())


def split_tokenize(text: str) -> list[str]:
    """Whitespace tokens of the lower-cased text (punctuation stays attached: 'mongodb?' != 'mongodb')."""
    return text.lower().split()


@lru_cache(maxsize=1)
def stop_words() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def stop_tokenize(text: str) -> list[str]:
    stops = stop_words()
    return [t for t in tokenize(text) if t not in stops]


@lru_cache(maxsize=1)
def _porter():
    import snowballstemmer

    stemmer = snowballstemmer.stemmer("porter")
    return lru_cache(maxsize=200_000)(stemmer.stemWord)


def porter_tokenize(text: str) -> list[str]:
    stem = _porter()
    return [stem(t) for t in tokenize(text)]


def clear_caches() -> None:
    """Forget memoised stems (so a timing run pays for stemming again)."""
    _porter.cache_clear()


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {
    "split": split_tokenize,
    "regex": tokenize,
    "regex-stop": stop_tokenize,
    "regex-porter": porter_tokenize,
}


def get_tokenizer(name: str) -> Callable[[str], list[str]]:
    try:
        return TOKENIZERS[name]
    except KeyError:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}") from None
