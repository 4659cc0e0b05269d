"""The synthetic episodic benchmark of checkpoint 15 (sparse distributed memory), generated with a seed.

What the reference did (CHECKPOINTS.md, CK15, `research_playground/sdm/dataset.py`, described there; this
module is written from that description): 50 families cycling four event types (trip, meeting, purchase,
preference), each one base event plus four siblings that vary one or two attributes (trip: month or purpose,
30 % also the destination; meeting: month or topic, 30 % also the kind; purchase: month or price, 30 % also the
store; preference: the reason only) -> 250 events; one query per event and noise mode (partial, paraphrase,
fragment, noisy) -> 1,000 queries, drawn with seed + 1.

Its flaws, and what happens here (docs/sdm.md):
- duplicate event texts (a sibling redraw may equal an existing event): here a duplicate is repaired by a
  redraw from a separate repair stream, so the main random stream — and so every other event and query —
  stays the same as in the faithful generator (`faithful=True` keeps the duplicates);
- substring synonym swaps ("in" inside "meeting"): here whole words only (`faithful=True`: `str.replace`);
- colliding family keys (a key built from one base attribute merges families): here the family index is the
  key (`faithful=True`: type + one base attribute, which collides);
- queries that cannot tell their target from other events (a partial query of a preference drops the only
  attribute siblings differ in): measured, not removed — `achievable_p1` is the P@1 ceiling (below).

The achievable P@1 ceiling. A query reveals a set of its target's attributes (`Query.revealed`: all of them
for paraphrase and noisy, the kept ones for partial and fragment). Its *consistent set* C(q) is every event of
the target's type whose revealed attributes have the same values as the target's (the target included).
The generator picks which attributes a query keeps independently of the values, so given the query text every
event of C(q) is equally likely to be the target; the best any system can expect is 1/|C(q)|, and the
ceiling of a mode is the mean of 1/|C(q)| over its queries. `text_ceiling` is the weaker bound the
reference's own count gives: queries with the same text get the same ranking, so per distinct text at most
the most frequent target among them can be right.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

TYPES = ("trip", "meeting", "purchase", "preference")
MODES = ("partial", "paraphrase", "fragment", "noisy")

_CITIES = ("Paris", "London", "Berlin", "Tokyo", "Madrid", "Rome", "Lisbon", "Vienna", "Prague", "Dublin", "Oslo",
           "Athens", "Boston", "Chicago", "Denver", "Seattle", "Toronto", "Sydney", "Lima", "Cairo")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
VOCAB: dict[str, tuple[str, ...]] = {
    "origin": _CITIES, "destination": _CITIES, "month": _MONTHS,
    "purpose": ("a conference", "a wedding", "a vacation", "a job interview", "a family visit", "a concert",
                "a workshop", "a funeral", "a marathon", "a client visit"),
    "kind": ("team", "client", "board", "project", "planning", "review", "kickoff", "strategy"),
    "person": ("Anna", "Ben", "Carla", "David", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kofi", "Lena",
               "Marco", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tara"),
    "topic": ("the budget", "the roadmap", "hiring", "the launch", "the merger", "security", "the migration",
              "pricing", "the offsite", "the audit", "onboarding", "the redesign", "marketing", "the contract",
              "the deadline"),
    "item": ("a laptop", "a bicycle", "a camera", "running shoes", "a sofa", "a blender", "headphones", "a tent",
             "a desk lamp", "a kitchen knife", "a winter coat", "a phone", "a watch", "a backpack", "a printer",
             "a guitar", "a mattress", "a kettle", "sunglasses", "a drill"),
    "store": ("Amazon", "IKEA", "Target", "Walmart", "Costco", "Best Buy", "REI", "Home Depot", "the mall",
              "a local shop", "eBay", "Decathlon"),
    "price": ("15", "25", "40", "60", "80", "120", "150", "200", "250", "300", "450", "600", "800", "1200"),
    "verb": ("like", "dislike", "love", "avoid", "prefer"),
    "object": ("green tea", "coffee", "spicy food", "jazz", "early mornings", "window seats", "cats",
               "crowded places", "sushi", "horror movies", "running", "cold weather", "board games", "podcasts",
               "red wine", "public transport", "dark chocolate", "camping", "video calls", "open offices"),
    "reason": ("it calms me", "it is healthy", "it reminds me of home", "my doctor said so", "it is cheaper",
               "it saves time", "it makes me anxious", "my partner likes it", "it helps me focus", "it is too loud",
               "it is easy on the stomach", "I grew up with it"),
}
ATTRIBUTES = {"trip": ("origin", "destination", "month", "purpose"), "meeting": ("kind", "person", "topic", "month"),
              "purchase": ("item", "store", "price", "month"), "preference": ("verb", "object", "reason")}
TEMPLATES = {"trip": "I flew from {origin} to {destination} in {month} for {purpose}",
             "meeting": "I had a {kind} meeting with {person} about {topic} in {month}",
             "purchase": "I bought {item} from {store} for ${price} in {month}",
             "preference": "I {verb} {object} because {reason}"}
# Sibling rule: one of `vary` (50/50), plus `also` with probability 0.3 (preference: the reason only).
SIBLING_RULES = {"trip": (("month", "purpose"), "destination"), "meeting": (("month", "topic"), "kind"),
                 "purchase": (("month", "price"), "store"), "preference": (("reason",), None)}
PARTIAL = {"trip": ("trip to {destination} in {month}", ("destination", "month")),
           "meeting": ("meeting with {person} about {topic}", ("person", "topic")),
           "purchase": ("bought {item} in {month}", ("item", "month")),
           "preference": ("I {verb} {object}", ("verb", "object"))}
FRAGMENT_ATTRIBUTES = {"trip": ("destination", "month", "purpose"), "meeting": ("person", "topic", "month", "kind"),
                       "purchase": ("item", "store", "month"), "preference": ("object", "reason")}
# Eleven swaps, each applied once with p = 0.5. Several are substrings of other words ("in" in "meeting" and
# "Berlin", "on" in "London", "like" in "dislike", "it" in "kitchen"): `str.replace` (the reference) breaks them.
SYNONYMS = (("flew", "travelled"), ("bought", "purchased"), ("in", "during"), ("meeting", "get-together"),
            ("about", "regarding"), ("because", "since"), ("with", "alongside"), ("from", "out of"),
            ("like", "enjoy"), ("on", "upon"), ("it", "this"))
FILLERS = ("um, so", "you know,", "I think", "if I remember correctly,", "not sure but", "anyway,", "by the way,",
           "or something like that", "if that helps")
FAITHFUL_KEY = {"trip": "destination", "meeting": "person", "purchase": "item", "preference": "object"}


@dataclass(frozen=True)
class Event:
    id: str
    text: str
    type: str
    family: int  # index of the family (the true sibling set)
    family_key: str  # the key sibling confusion is judged by (collides when faithful=True)
    sibling: int  # 0 = the base event
    attributes: dict[str, str] = field(hash=False, compare=False, default_factory=dict)


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    target: str  # event id
    mode: str  # one of MODES
    revealed: tuple[str, ...]  # the target attributes the query carries (all for paraphrase / noisy)


@dataclass(frozen=True)
class EpisodicBenchmark:
    events: tuple[Event, ...]
    queries: tuple[Query, ...]
    seed: int
    faithful: bool
    repaired: int = 0  # sibling redraws that repaired a duplicate text (0 when faithful)

    @property
    def name(self) -> str:
        return f"episodic-{'faithful' if self.faithful else 'fixed'}-{self.seed}"

    def event_index(self) -> dict[str, int]:
        return {e.id: i for i, e in enumerate(self.events)}

    def duplicate_groups(self) -> list[list[str]]:
        """Event ids sharing one text, for every text held by two or more events."""
        by_text: dict[str, list[str]] = {}
        for e in self.events:
            by_text.setdefault(e.text, []).append(e.id)
        return [ids for ids in by_text.values() if len(ids) > 1]

    def family_key_sizes(self) -> dict[str, int]:
        return dict(Counter(e.family_key for e in self.events))

    def consistent_sets(self, queries=None) -> list[list[str]]:
        """C(q) for each query: events of the target's type agreeing with it on every revealed attribute."""
        by_id = {e.id: e for e in self.events}
        out = []
        for q in self.queries if queries is None else queries:
            t = by_id[q.target]
            out.append([e.id for e in self.events if e.type == t.type
                        and all(e.attributes[a] == t.attributes[a] for a in q.revealed)])
        return out

    def achievable_p1(self, queries=None) -> np.ndarray:
        """Per query 1/|C(q)|: the P@1 a system can expect at best (module docstring)."""
        return np.array([1.0 / len(c) for c in self.consistent_sets(queries)])

    def exact_queries(self) -> tuple[Query, ...]:
        """The sanity check: each event's own text as the query (mode `exact`, every attribute revealed)."""
        return tuple(Query(f"exact-{e.id}", e.text, e.id, "exact", ATTRIBUTES[e.type]) for e in self.events)

    def stats(self) -> dict:
        dup = self.duplicate_groups()
        keys = self.family_key_sizes()
        per_mode = {}
        for mode in MODES:
            qs = [q for q in self.queries if q.mode == mode]
            per_mode[mode] = {"queries": len(qs), "distinct_texts": len({q.text for q in qs}),
                              "ceiling": float(self.achievable_p1(qs).mean()), "text_ceiling": text_ceiling(qs)}
        return {"events": len(self.events), "queries": len(self.queries),
                "distinct_event_texts": len({e.text for e in self.events}), "duplicate_groups": len(dup),
                "events_in_duplicate_groups": sum(map(len, dup)), "family_keys": len(keys),
                "largest_family_key": max(keys.values()), "repaired_duplicates": self.repaired,
                "types": dict(Counter(e.type for e in self.events)), "modes": per_mode}


def text_ceiling(queries) -> float:
    """Share of queries a text -> ranking function can get right: per distinct text, its most frequent target."""
    groups: dict[str, Counter] = {}
    for q in queries:
        groups.setdefault(q.text, Counter())[q.target] += 1
    n = sum(sum(c.values()) for c in groups.values())
    return sum(max(c.values()) for c in groups.values()) / n if n else float("nan")


def swap_synonyms(text: str, swaps, faithful: bool = False) -> str:
    """Apply each (old, new) in order: whole words (fixed) or every substring (`faithful`, the reference's bug)."""
    for old, new in swaps:
        text = text.replace(old, new) if faithful else re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


def render(kind: str, attributes: dict[str, str]) -> str:
    return TEMPLATES[kind].format(**attributes)


def _draw(rng: np.random.Generator, attribute: str, exclude: str | None = None) -> str:
    values = [v for v in VOCAB[attribute] if v != exclude]
    return values[int(rng.integers(len(values)))]


def _base(rng: np.random.Generator, kind: str) -> dict[str, str]:
    attrs = {}
    for a in ATTRIBUTES[kind]:
        attrs[a] = _draw(rng, a, attrs.get("origin") if a == "destination" else None)
    return attrs


def _vary(rng: np.random.Generator, kind: str, base: dict[str, str]) -> dict[str, str]:
    """A sibling: the rule's attributes redrawn from the whole vocabulary, as the reference does (so the old
    value may come back: a duplicate, which the fixed generator repairs afterwards with its own stream)."""
    vary, also = SIBLING_RULES[kind]
    attrs = dict(base)
    changed = [vary[int(rng.integers(len(vary)))]]
    if also is not None and rng.random() < 0.3:
        changed.append(also)
    for a in changed:
        attrs[a] = _draw(rng, a, attrs["origin"] if a == "destination" else None)
    return attrs


def _repair(rng: np.random.Generator, kind: str, attrs: dict[str, str], taken: set[str]) -> dict[str, str]:
    """Redraw the rule's attributes from the repair stream until the text is new."""
    vary, also = SIBLING_RULES[kind]
    names = [*vary, *([also] if also else [])]
    for _ in range(10_000):
        new = dict(attrs)
        a = names[int(rng.integers(len(names)))]
        values = [v for v in VOCAB[a] if not (a == "destination" and v == new["origin"])]
        new[a] = values[int(rng.integers(len(values)))]
        if render(kind, new) not in taken:
            return new
    raise RuntimeError(f"cannot make a unique {kind} sibling")  # pragma: no cover — the vocabularies are large


def _query(rng: np.random.Generator, e: Event, mode: str, faithful: bool) -> Query:
    """One query; each mode consumes the same number of draws whatever the event, so fixed and faithful
    benchmarks stay aligned draw for draw."""
    a = e.attributes
    if mode == "partial":
        template, kept = PARTIAL[e.type]
        return Query(f"{e.id}-partial", template.format(**a), e.id, mode, kept)
    if mode == "paraphrase":
        chosen = [s for s, u in zip(SYNONYMS, rng.random(len(SYNONYMS))) if u < 0.5]
        return Query(f"{e.id}-paraphrase", swap_synonyms(e.text, chosen, faithful), e.id, mode, ATTRIBUTES[e.type])
    if mode == "fragment":
        names = FRAGMENT_ATTRIBUTES[e.type]
        k = 1 + int(rng.integers(2))
        kept = tuple(names[i] for i in sorted(rng.choice(len(names), size=k, replace=False)))
        values = [a[n] if n != "price" else f"${a[n]}" for n in kept]
        text = ", ".join([f"{values[0]} {e.type}", *values[1:]])
        return Query(f"{e.id}-fragment", text, e.id, mode, kept)
    if mode == "noisy":
        i, j = rng.choice(len(FILLERS), size=2, replace=False)
        return Query(f"{e.id}-noisy", f"{FILLERS[i]} {e.text} {FILLERS[j]}", e.id, mode, ATTRIBUTES[e.type])
    raise ValueError(f"unknown noise mode {mode!r}; choose one of {', '.join(MODES)}")


def episodic_benchmark(seed: int = 42, n_families: int = 50, siblings_per_family: int = 5,
                       faithful: bool = False) -> EpisodicBenchmark:
    """250 events (50 families x 5) and 1,000 queries (one per event and noise mode), from `seed` (events) and
    `seed + 1` (queries), as the reference's 42 / 43. `faithful=True` keeps the reference's flaws (duplicate
    texts, substring swaps, colliding family keys); otherwise the same draws, repaired (module docstring)."""
    if n_families < 1 or siblings_per_family < 1:
        raise ValueError(f"n_families and siblings_per_family must be >= 1, got {n_families}, {siblings_per_family}")
    rng = np.random.default_rng(seed)
    repair_rng = np.random.default_rng([seed, 1])
    events: list[Event] = []
    taken: set[str] = set()
    repaired = 0
    for f in range(n_families):
        kind = TYPES[f % len(TYPES)]
        base = _base(rng, kind)
        key = f"{kind}:{base[FAITHFUL_KEY[kind]]}" if faithful else f"{kind}-{f:03d}"
        for s in range(siblings_per_family):
            attrs = base if s == 0 else _vary(rng, kind, base)
            if not faithful and render(kind, attrs) in taken:
                attrs = _repair(repair_rng, kind, attrs, taken)
                repaired += 1
            text = render(kind, attrs)
            taken.add(text)
            events.append(Event(f"f{f:03d}-s{s}", text, kind, f, key, s, dict(attrs)))
    qrng = np.random.default_rng(seed + 1)
    queries = tuple(_query(qrng, e, mode, faithful) for e in events for mode in MODES)
    return EpisodicBenchmark(tuple(events), queries, seed, faithful, repaired)


__all__ = ["ATTRIBUTES", "EpisodicBenchmark", "Event", "MODES", "Query", "SYNONYMS", "TYPES", "episodic_benchmark",
           "swap_synonyms", "text_ceiling"]
