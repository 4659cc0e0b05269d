"""An offline, labels-free enricher: entities from capitalised tokens and speaker names, temporal markers
resolved against the session date.

Temporal rules (session date d; week = Monday..Sunday):
- "today" / "tonight" / "this morning|afternoon|evening" -> d; "yesterday" -> d-1; "tomorrow" -> d+1;
  "the day before yesterday" -> d-2
- "last|this|next week" -> that week's Monday..Sunday; "last|this|next weekend" -> Saturday..Sunday;
  "last|this|next month" -> YYYY-MM; "last|this|next year" -> YYYY
- "N days|weeks ago" -> a date, "N months ago" -> YYYY-MM, "N years ago" -> YYYY (N a digit, a number word, "a")
  and "in N days|weeks|months|years" forwards
- weekday names: "last Friday" -> the latest Friday before d, "next|this coming Friday" -> the first after d;
  a bare "Friday" -> the first after d when the sentence is in the future tense ("will", "going to", "'ll",
  "gonna", "plan"), else the latest before d
- month names: with a day and/or year ("7 May 2023", "May 7", "May 2022") -> that date / month; a bare month
  ("in July") -> this year's when it has passed (or is this month), else last year's; next year's / the coming
  one in the future tense; "last|next <Month>" likewise. "May" counts only when it cannot be the verb
  (after in/on/of/since/until/by/last/next/this/early/late/mid, or next to a number).
- explicit years 1900-2099 -> YYYY
Each marker is "phrase: value", with values ISO dates (YYYY-MM-DD, plus the spelled-out "7 May 2023" for days),
months YYYY-MM, years YYYY, and ranges "start..end".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from lethe_core.datasets.model import Dataset, Turn
from lethe_core.enrichment.base import Enrichment

MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"]
MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple of": 2, "a couple of": 2}
_FUTURE = re.compile(r"\b(will|going to|gonna|plan(?:ning|s)? to|'ll|upcoming|coming up)\b", re.I)
_MONTH_NAME = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
_NUM = r"(\d+|a couple of|couple of|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"


@dataclass(frozen=True)
class Marker:
    phrase: str
    value: str
    start: int  # character offset of the phrase in the text

    def __str__(self) -> str:
        return f"{self.phrase}: {self.value}"


def _day(d: date) -> str:
    return f"{d.isoformat()} ({d.day} {MONTHS[d.month - 1].capitalize()} {d.year})"


def _range(a: date, b: date) -> str:
    return f"{a.isoformat()}..{b.isoformat()}"


def _month(y: int, m: int) -> str:
    return f"{y:04d}-{m:02d}"


def _shift_month(y: int, m: int, k: int) -> tuple[int, int]:
    n = y * 12 + (m - 1) + k
    return n // 12, n % 12 + 1


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _month_number(token: str) -> int:
    token = token.lower()
    return MONTHS.index(token) + 1 if token in MONTHS else MONTH_ABBR[token[:4] if token == "sept" else token[:3]]


def _sentence_of(text: str, pos: int) -> str:
    a = max(text.rfind(c, 0, pos) for c in ".!?\n") + 1
    ends = [i for i in (text.find(c, pos) for c in ".!?\n") if i >= 0]
    return text[a: min(ends) if ends else len(text)]


def resolve_temporal(text: str, when: datetime | date | None) -> list[Marker]:
    """Every temporal expression of `text` that the rules above resolve against `when` (none without a date),
    in text order; overlapping matches keep the longest."""
    if when is None:
        return []
    d = when.date() if isinstance(when, datetime) else when
    found: list[tuple[int, int, str, str]] = []  # start, end, phrase, value

    def add(m: re.Match, value: str, group: int = 0):
        found.append((m.start(group), m.end(group), m.group(group), value))

    for m in re.finditer(r"\b(the day before yesterday|yesterday|today|tonight|tomorrow|this (?:morning|afternoon|evening))\b", text, re.I):
        w = m.group(1).lower()
        off = {"the day before yesterday": -2, "yesterday": -1, "tomorrow": 1}.get(w, 0)
        add(m, _day(d + timedelta(days=off)))
    for m in re.finditer(r"\b(last|this|next|past) (week|weekend|month|year)\b", text, re.I):
        rel, unit = m.group(1).lower(), m.group(2).lower()
        k = {"last": -1, "past": -1, "this": 0, "next": 1}[rel]
        if unit == "week":
            mon = _monday(d) + timedelta(weeks=k)
            add(m, _range(mon, mon + timedelta(days=6)))
        elif unit == "weekend":
            sat = _monday(d) + timedelta(days=5) + timedelta(weeks=k)
            add(m, _range(sat, sat + timedelta(days=1)))
        elif unit == "month":
            add(m, _month(*_shift_month(d.year, d.month, k)))
        else:
            add(m, f"{d.year + k:04d}")
    for m in re.finditer(rf"\b{_NUM} (day|week|month|year)s? ago\b", text, re.I):
        n = int(m.group(1)) if m.group(1).isdigit() else NUMBER_WORDS[m.group(1).lower()]
        add(m, _offset(d, -n, m.group(2).lower()))
    for m in re.finditer(rf"\bin {_NUM} (day|week|month|year)s?\b", text, re.I):
        n = int(m.group(1)) if m.group(1).isdigit() else NUMBER_WORDS[m.group(1).lower()]
        add(m, _offset(d, n, m.group(2).lower()))
    for m in re.finditer(r"\b(?:(last|next|this coming|this past|this) )?(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", text, re.I):
        rel = (m.group(1) or "").lower()
        wd = WEEKDAYS.index(m.group(2).lower())
        future = rel in ("next", "this coming") or (rel == "" and _FUTURE.search(_sentence_of(text, m.start())))
        if rel == "this":
            future = bool(_FUTURE.search(_sentence_of(text, m.start())))
        if future:
            delta = (wd - d.weekday()) % 7 or 7
            add(m, _day(d + timedelta(days=delta)))
        else:
            delta = (d.weekday() - wd) % 7 or 7
            add(m, _day(d - timedelta(days=delta)))
    # explicit dates with a month name
    for m in re.finditer(rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH_NAME}\.?(?:,? (\d{{4}}))?\b", text, re.I):
        _explicit(m, d, int(m.group(1)), m.group(2), m.group(3), add)
    for m in re.finditer(rf"\b{_MONTH_NAME}\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,? (\d{{4}}))?\b(?!:)", text, re.I):
        _explicit(m, d, int(m.group(2)), m.group(1), m.group(3), add)
    for m in re.finditer(rf"\b{_MONTH_NAME},? (\d{{4}})\b", text, re.I):
        if _is_month_word(text, m, m.group(1), "with a year"):
            add(m, _month(int(m.group(2)), _month_number(m.group(1))))
    for m in re.finditer(rf"\b(?:(last|next|this|early|late|mid|in|on|of|since|until|by|during|before|after) )?{_MONTH_NAME}\b", text, re.I):
        rel = (m.group(1) or "").lower()
        if not _is_month_word(text, m, m.group(2), rel):
            continue
        mo = _month_number(m.group(2))
        future = rel == "next" or (rel not in ("last",) and _FUTURE.search(_sentence_of(text, m.start())))
        if future:
            y = d.year if mo > d.month else d.year + 1
            if rel != "next" and mo == d.month:
                y = d.year
        else:
            y = d.year if mo < d.month or (mo == d.month and rel != "last") else d.year - 1
        add(m, _month(y, mo), 0 if rel in ("last", "next", "early", "late", "mid") else 2)
    for m in re.finditer(r"(?<![\d:/-])\b(19\d{2}|20\d{2})\b(?![\d:/-])", text):
        add(m, m.group(1))
    return _longest(found)


def _is_month_word(text: str, m: re.Match, word: str, prep: str = "") -> bool:
    """Month names count when capitalised; 'May', 'March' and abbreviations also need a preposition before them
    or a number after them (so the verbs 'may' / 'march' are never read as months)."""
    if not word or not word[0].isupper():
        return False
    low = word.lower()
    if low in ("may", "march") or low not in MONTHS:
        return bool(prep) or bool(re.match(r",? ?\d", text[m.end(): m.end() + 3]))
    return True


def _explicit(m: re.Match, d: date, day: int, month: str, year: str | None, add) -> None:
    mo = _month_number(month)
    y = int(year) if year else (d.year if mo <= d.month else d.year - 1)
    try:
        add(m, _day(date(y, mo, day)))
    except ValueError:  # "31 February"
        return


def _offset(d: date, n: int, unit: str) -> str:
    if unit == "day":
        return _day(d + timedelta(days=n))
    if unit == "week":
        return _day(d + timedelta(weeks=n))
    if unit == "month":
        return _month(*_shift_month(d.year, d.month, n))
    return f"{d.year + n:04d}"


def _longest(found: list[tuple[int, int, str, str]]) -> list[Marker]:
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    out: list[Marker] = []
    end = -1
    for start, stop, phrase, value in found:
        if start >= end:
            out.append(Marker(phrase, value, start))
            end = stop
    return out


# ---- entities -------------------------------------------------------------------------------------------

_STOP = set("""i i'm i've i'd i'll im a an the this that these those it its it's he she they we you my our your his her
their them me us oh hey hi hello yes yeah no wow thanks thank so and but or if when what why how where who which
well also just really great good nice awesome cool ok okay sure sorry please anyway btw lol haha omg maybe
congrats congratulations absolutely definitely totally happy glad love mr mrs ms dr yesterday today tomorrow tonight last next this
""".split())
_CAPS_RUN = re.compile(r"(?:[A-Z][\w'’&-]*\w|[A-Z])(?:\s+(?:(?:of|the|de) )?(?:[A-Z][\w'’&-]*\w|[A-Z]))*")


def extract_entities(text: str, speakers: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Known speaker names found in the text (any case), then runs of capitalised words that are not sentence
    openers, pronouns, interjections, weekday or month names; in order of first appearance, de-duplicated."""
    out: dict[str, None] = {}
    for name in sorted(speakers):
        if name and re.search(rf"\b{re.escape(name)}\b", text, re.I):
            out[name] = None
    for m in _CAPS_RUN.finditer(text):
        words = m.group(0).split()
        # drop leading stop / calendar words ("The Beatles" keeps "Beatles"; "Friday" goes)
        while words and (words[0].lower().strip("'’") in _STOP or _calendar(words[0])):
            words = words[1:]
        while words and (words[-1].lower() in ("of", "the", "de") or words[-1].lower().strip("'’") in _STOP or _calendar(words[-1])):
            words = words[:-1]
        if not words:
            continue
        phrase = " ".join(words)
        start = m.start() + m.group(0).find(words[0])
        if len(words) == 1 and _sentence_start(text, start) and phrase.lower() not in {s.lower() for s in speakers}:
            continue  # a lone capitalised word opening a sentence is only capitalised for that reason
        if phrase.lower().strip("'’s") in _STOP or len(phrase) < 2:
            continue
        phrase = re.sub(r"['’]s$", "", phrase)
        if phrase.lower() not in {o.lower() for o in out}:
            out[phrase] = None
    return list(out)


def _calendar(word: str) -> bool:
    w = word.lower().rstrip("s")
    return w in WEEKDAYS or w in MONTHS or w in MONTH_ABBR


def _sentence_start(text: str, pos: int) -> bool:
    before = text[:pos].rstrip(" \"'“(")
    return not before or before[-1] in ".!?:\n"


# ---- the enricher ---------------------------------------------------------------------------------------

def _strip_speaker(turn: Turn) -> str:
    prefix = f"{turn.speaker}: "
    return turn.text[len(prefix):] if turn.speaker and turn.text.startswith(prefix) else turn.text


class HeuristicEnricher:
    """Entities and resolved temporal markers; no gist, no anticipated queries (nothing to write them offline)."""

    name = "heuristic"

    def __init__(self, speakers_by_conversation: dict[str, set[str]] | None = None):
        self.speakers_by_conversation = speakers_by_conversation or {}

    @classmethod
    def from_dataset(cls, dataset: Dataset) -> "HeuristicEnricher":
        speakers: dict[str, set[str]] = {}
        for t in dataset.require_corpus().turns:
            if t.speaker:
                speakers.setdefault(t.conversation_id, set()).add(t.speaker)
        return cls(speakers)

    def enrich_turn(self, turn: Turn, session_date: datetime | None) -> Enrichment:
        text = _strip_speaker(turn)
        speakers = self.speakers_by_conversation.get(turn.conversation_id, set())
        entities = [e for e in extract_entities(text, speakers)]
        markers = [str(m) for m in resolve_temporal(text, session_date)]
        return Enrichment(entities=tuple(entities), temporal_markers=tuple(markers))
