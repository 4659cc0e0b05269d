from lethe_core.retrieval.text import tokenize


def test_regex_tokenizer_drops_punctuation_and_lowercases():
    assert tokenize("MongoDB? mongodb, Mongo_DB 2023!") == ["mongodb", "mongodb", "mongo_db", "2023"]


def test_non_ascii_letters_split_words():
    # [A-Za-z0-9_]+ is ASCII-only: accented letters break tokens, as in the reference.
    assert tokenize("café naïve") == ["caf", "na", "ve"]


def test_named_tokenizers():
    from lethe_core.retrieval.text import TOKENIZERS, get_tokenizer

    text = "The running dogs? They ran, MongoDB!"
    assert get_tokenizer("split")(text) == ["the", "running", "dogs?", "they", "ran,", "mongodb!"]
    assert get_tokenizer("regex")(text) == tokenize(text) == ["the", "running", "dogs", "they", "ran", "mongodb"]
    assert get_tokenizer("regex-stop")(text) == ["running", "dogs", "ran", "mongodb"]
    assert get_tokenizer("regex-porter")(text) == ["the", "run", "dog", "thei", "ran", "mongodb"]
    assert set(TOKENIZERS) == {"split", "regex", "regex-stop", "regex-porter"}


def test_unknown_tokenizer_is_a_clear_error():
    import pytest

    from lethe_core.retrieval.pipeline import PipelineConfig
    from lethe_core.retrieval.text import get_tokenizer

    with pytest.raises(ValueError, match="unknown tokenizer 'porter'.*regex-porter"):
        get_tokenizer("porter")
    with pytest.raises(ValueError, match="unknown tokenizer"):
        PipelineConfig(tokenizer="porter")
    with pytest.raises(ValueError, match="unknown scope"):
        PipelineConfig(scope="session")
