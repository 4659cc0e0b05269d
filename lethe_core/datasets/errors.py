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


def read_json(path: Path) -> Any:
    """Load a JSON file; a missing file or broken JSON becomes a DatasetError."""
    import json

    if not path.exists():
        raise DatasetError(path, "file not found")
    try:
        with path.open("rb") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
