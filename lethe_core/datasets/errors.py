"""One error type for bad dataset input: it always names the file, the record and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class DatasetError(ValueError):
    """A dataset file is missing or malformed."""

    def __init__(self, file: str | Path, problem: str, record: str | None = None, field: str | None = None):
        self.file = str(file)
        self.record = record
        self.field = field
        self.problem = problem
        where = self.file
        if record is not None:
            where += f", record {record}"
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {problem}")


_TYPE_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object", bool: "a boolean"}


def require(obj: Any, key: str, typ: type | tuple[type, ...], file: str | Path, record: str, optional: bool = False):
    """Fetch `obj[key]` and check its type, or raise a DatasetError naming file, record and field."""
    if not isinstance(obj, dict):
        raise DatasetError(file, f"expected an object, got {type(obj).__name__}", record=record)
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise DatasetError(file, "missing", record=record, field=key)
    value = obj[key]
    types = typ if isinstance(typ, tuple) else (typ,)
    # bool is an int subclass; a boolean where an integer is expected is still wrong.
    if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
        expected = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        raise DatasetError(file, f"expected {expected}, got {type(value).__name__} {value!r:.60}", record=record, field=key)
    return value


def _readable_file(path: Path) -> Path:
    """A missing path, a directory or an unreadable file is one DatasetError, never an OSError traceback."""
    if not path.exists():
        raise DatasetError(path, "file not found")
    if path.is_dir():
        raise DatasetError(path, "is a directory; expected a file")
    return path


def read_bytes(path: Path) -> bytes:
    """The file's bytes, with permission and other OS errors reported against the file."""
    _readable_file(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DatasetError(path, f"cannot read: {exc.strerror or exc}") from None


def decode_utf8(raw: bytes, file: str | Path, record: str | None = None) -> str:
    """Strict UTF-8 (a leading BOM allowed); a bad byte names the file and its line, not a bare codec offset."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        newline = b"\n"
        where = record or f"line {raw.count(newline, 0, exc.start) + 1}"
        raise DatasetError(file, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); binary or another encoding?",
                           record=where) from None


def parse_json(text: str, file: str | Path, record: str | None = None) -> Any:
    """json.loads reporting every parse failure (syntax, nesting too deep, too many digits) as a DatasetError.

    Bare NaN/Infinity still parse (Python's json accepts them); callers that need finite numbers check the field,
    so the error can name the record.
    """
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}" if record is None else f"column {exc.colno}"
        raise DatasetError(file, f"invalid JSON at {where}: {exc.msg}", record=record) from None
    except (ValueError, RecursionError) as exc:
        raise DatasetError(file, f"invalid JSON: {exc}", record=record) from None


def read_json(path: Path) -> Any:
    """Load a JSON file; a missing, unreadable, non-UTF-8 or broken file becomes a DatasetError."""
    return parse_json(decode_utf8(read_bytes(path), path), path)


def iter_text_lines(path: Path):
    """(line number, text) of a UTF-8 text file, streamed; a bad byte names its line."""
    _readable_file(path)
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                yield lineno, decode_utf8(raw, path, record=f"line {lineno}").rstrip("\r\n")
    except OSError as exc:
        raise DatasetError(path, f"cannot read: {exc.strerror or exc}") from None
