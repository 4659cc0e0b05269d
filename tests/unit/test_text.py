from lethe_core.text import tokenize


def test_regex_tokenizer_drops_punctuation_and_lowercases():
    assert tokenize("MongoDB? mongodb, Mongo_DB 2023!") == ["mongodb", "mongodb", "mongo_db", "2023"]


def test_non_ascii_letters_split_words():
    # [A-Za-z0-9_]+ is ASCII-only: accented letters break tokens, as in the reference.
    assert tokenize("café naïve") == ["caf", "na", "ve"]
