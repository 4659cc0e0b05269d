"""One error type for bad dataset input: it always names the file, the record and the field."""

from __future__ import annotations

import re
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
    """A missing path, a directory, a FIFO or device, an unreadable or oversized file is one DatasetError,
    never an OSError traceback, a read until MemoryError (/dev/zero) or a read that never returns (a FIFO)."""
    import stat

    from lethe_core.util.paths import max_input_bytes

    path = Path(path)
    try:
        st = path.stat()  # follows links: a link to a regular file is fine
    except FileNotFoundError:
        raise DatasetError(path, "file not found") from None
    except OSError as exc:
        raise DatasetError(path, f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise DatasetError(path, "is a directory; expected a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a character device" if stat.S_ISCHR(st.st_mode)
                else "a block device" if stat.S_ISBLK(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise DatasetError(path, f"is {kind}; expected a regular file")
    limit = max_input_bytes()
    if st.st_size > limit:
        raise DatasetError(path, f"is {_mb(st.st_size)}, above the input limit of {_mb(limit)}; "
                           "set LETHE_MAX_INPUT_MB to read a larger file")
    return path


def _mb(n: int) -> str:
    return f"{n / 2**20:,.1f} MB"


def input_file(path: str | Path) -> Path:
    """`path` checked as an input file: it exists, is a regular file (no FIFO, device or folder) within the size
    limit (`LETHE_MAX_INPUT_MB`); otherwise one DatasetError naming it."""
    return _readable_file(Path(path))


def read_bytes(path: Path) -> bytes:
    """The file's bytes (a checked `input_file`), read no further than the size limit (a file that grows while it
    is read, or a /proc file that reports size 0, stops there); OS errors are reported against the file."""
    from lethe_core.util.paths import max_input_bytes

    path = _readable_file(Path(path))
    limit = max_input_bytes()
    try:
        with path.open("rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise DatasetError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise DatasetError(path, f"holds more than the input limit of {_mb(limit)}; set LETHE_MAX_INPUT_MB to read a larger file")
    return raw


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
    so the error can name the record. A string holding a lone surrogate (a `\\ud800` escape without its pair) is
    an error naming the record and the field: it cannot be encoded as UTF-8, and would otherwise fail much later,
    naming nothing, when the text is hashed or tokenised.
    """
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}" if record is None else f"column {exc.colno}"
        raise DatasetError(file, f"invalid JSON at {where}: {exc.msg}", record=record) from None
    except (ValueError, RecursionError) as exc:
        raise DatasetError(file, f"invalid JSON: {exc}", record=record) from None
    if _SURROGATE_ESCAPE.search(text):  # strict UTF-8 decoding admits no surrogate, so only an escape makes one
        check_encodable(data, file, record)
    return data


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def check_encodable(data: Any, file: str | Path, record: str | None = None) -> None:
    """Raise a DatasetError at the first string (key or value) of parsed JSON that UTF-8 cannot encode.

    The error names the record (`#i` for an item of a top-level list, or `record` as given) and the field as a
    path inside it (`conversation.session_2[5].text`).
    """
    stack: list[tuple[Any, tuple]] = [(data, ())]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            _check_text(node, file, record, where)
        elif isinstance(node, dict):
            for key, value in reversed(list(node.items())):
                _check_text(key, file, record, (*where, key))
                stack.append((value, (*where, key)))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                stack.append((node[i], (*where, i)))


def _printable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _check_text(text: str, file, record, where: tuple) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        rec, path = record, list(where)
        if rec is None and path and isinstance(path[0], int):
            rec, path = f"#{path[0]}", path[1:]
        field = "".join(f"[{p}]" if isinstance(p, int) else f"{'.' if i else ''}{_printable(p)}" for i, p in enumerate(path))
        raise DatasetError(file, _surrogate_problem(text, exc.start), record=rec, field=field or None) from None


def _surrogate_problem(text: str, at: int) -> str:
    before = text[max(0, at - 24):at]
    return (f"lone surrogate \\u{ord(text[at]):04x} at character {at:,}" + (f" (after {before!r})" if before else "")
            + ": not encodable as UTF-8 (a \\u escape without its pair?)")


def check_text(text: str, file: str | Path, record: str | None = None, field: str | None = None) -> str:
    """`text` if UTF-8 can encode it, else a DatasetError naming file, record and field (for text that does not
    come through `parse_json`)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DatasetError(file, _surrogate_problem(text, exc.start), record=record, field=field) from None
    return text


def read_json(path: Path) -> Any:
    """Load a JSON file; a missing, unreadable, non-UTF-8 or broken file becomes a DatasetError."""
    return parse_json(decode_utf8(read_bytes(path), path), path)


def iter_text_lines(path: Path):
    """(line number, text) of a UTF-8 text file (a checked `input_file`), streamed; a bad byte names its line.
    Reading stops with a DatasetError past the size limit (a file that grows while read)."""
    from lethe_core.util.paths import max_input_bytes

    _readable_file(path)
    limit, seen = max_input_bytes(), 0
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                seen += len(raw)
                if seen > limit:
                    raise DatasetError(path, f"holds more than the input limit of {_mb(limit)}; set LETHE_MAX_INPUT_MB to read a larger file")
                yield lineno, decode_utf8(raw, path, record=f"line {lineno}").rstrip("\r\n")
    except OSError as exc:
        raise DatasetError(path, f"cannot read: {exc.strerror or exc}") from None
