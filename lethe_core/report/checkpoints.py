"""A checkpoint notebook's finding: what its verdict cell shows and what `make notebooks` reads back.

The verdict is computed, never typed. A notebook states each claim with its kind (`Claim`), `judge` reads the
claim's interval against it, and one **primary** claim decides the verdict; the secondary ones are listed with their
own outcomes. Outcomes: holds, smaller than claimed, inconclusive, does not hold, untestable; any but untestable may
be qualified "fragile" (below). The reason text names the interval used: its level and what it resamples.

**Effect of a stated size** (`kind="effect"`, 95 % CI): the claim is an effect on side `direction` of at least
m = `share` × |the reference's effect| (default share one half). With the CI signed to the claimed side, [L, H]:

| CI (signed)                 | outcome              | reading                                                   |
|-----------------------------|----------------------|-----------------------------------------------------------|
| L ≥ m                       | holds                | at least the stated share of the reference's effect       |
| 0 < L < m                   | smaller than claimed | an effect on the claimed side, its claimed size not shown |
| L ≤ 0 and H ≥ m             | inconclusive         | compatible with both the margin and zero                  |
| H < m and H < 0             | does not hold        | on the opposite side of zero                              |
| H < m and L > −m (H ≥ 0)    | does not hold        | the claimed size excluded, equivalent to zero within ±m   |
| H < m and L ≤ −m ≤ 0 ≤ H    | does not hold        | the claimed size excluded; zero and a reversal both open  |

**Null / equivalence** (`kind="null"`, TOST at 5 %, i.e. the 90 % CI, margin ±m stated): holds when the CI lies
inside (−m, m); does not hold when it lies outside (L ≥ m or H ≤ −m); inconclusive when it crosses ±m.

**Direction only** (`kind="direction"`, 95 % CI, said so in the reason): holds when the CI excludes zero on the
claimed side, does not hold when it excludes zero on the other side, inconclusive when it holds zero.

**Untestable**: the caller says why the data cannot test the claim (`untestable=`, e.g. nothing the claim is about
changed), or an effect / direction claim's CI is [0, 0]: every paired difference is zero, an exact null that no
sign can be read from. A null claim with CI [0, 0] holds (an exact null is inside any margin).

**Fragile**: a claim may carry a conversation-level CI (`stats.hierarchical_paired_ci`, the same level) beside the
query-level one. When the query-level CI excludes zero but the conversation-level one does not, the outcome is
qualified "(fragile)": it rests on treating the questions of one conversation as independent draws.

The `Finding` displays as markdown and carries its fields under a private MIME type, so the notebook index
(`lethe_core.report.notebooks`) is filled from the executed outputs themselves.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from lethe_core.experiments.rif_sweep import per_query_delta
from lethe_core.measures import stats
from lethe_core.results.store import json_safe

MIME = "application/vnd.lethe.finding+json"
OUTCOMES = ("holds", "smaller than claimed", "inconclusive", "does not hold", "untestable")
FRAGILE = "fragile"
VERDICTS = OUTCOMES + tuple(f"{o} ({FRAGILE})" for o in OUTCOMES if o != "untestable")
KINDS = ("effect", "null", "direction")
LEVELS = {"effect": 0.95, "null": 0.90, "direction": 0.95}  # the interval each kind is read on
SHARE = 0.5  # an effect claim holds when the CI clears this share of the reference's effect


def percent(level: float) -> str:
    """A confidence level as the documents print it: 95 %, 90 %, 99.55 % (a family-wise level is not rounded to 100 %)."""
    return f"{level * 100:.4g} %"


@dataclass(frozen=True)
class Claim:
    """One claim and the interval it is read on.

    `delta` and `ci` are the query-level estimate and CI at `level` (default by kind: 90 % for a null claim, whose
    TOST it is, else 95 %); `unit` says what that CI resamples. `reference` is the reference's effect in the units
    of `delta` (effect claims; the margin is `share` of it), `margin` the equivalence margin (null claims).
    `conversation_ci`: the hierarchical CI at the same level, when the rows have a conversation. `untestable`: why the
    data cannot test the claim, when the caller knows it cannot. `sample`: the per-query differences (and their
    conversations) the CIs were computed from, when `paired_claim` computed them, so a test can recompute both.
    """

    what: str
    delta: float
    ci: Sequence[float]
    kind: str = "effect"
    direction: int = +1
    reference: float | None = None
    share: float = SHARE
    margin: float | None = None
    level: float | None = None
    unit: str = "queries"
    conversation_ci: Sequence[float] | None = None
    untestable: str | None = None
    sample: dict | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"claim kind must be one of {KINDS}, got {self.kind!r}")
        if self.direction not in (+1, -1):
            raise ValueError(f"direction must be +1 or -1, got {self.direction!r}")
        for name in ("ci", "conversation_ci"):
            value = getattr(self, name)
            if value is not None:
                pair = (float(value[0]), float(value[1]))
                if pair[0] > pair[1]:
                    raise ValueError(f"{name} must be (lo, hi), got {pair}")
                object.__setattr__(self, name, pair)
        object.__setattr__(self, "delta", float(self.delta))
        if self.level is None:
            object.__setattr__(self, "level", LEVELS[self.kind])
        if self.kind == "effect":
            if self.margin is not None:
                raise ValueError("an effect claim's margin is share × |reference|; pass `share`, not `margin`")
            if self.reference is None or not self.direction * self.reference > 0 or not 0 < self.share:
                raise ValueError(f"an effect claim needs the reference's effect on the claimed side and a share > 0 "
                                 f"(reference {self.reference!r}, direction {self.direction:+d}, share {self.share!r})")
        elif self.kind == "null" and not (self.margin is not None and self.margin > 0):
            raise ValueError(f"a null claim needs an equivalence margin > 0, got {self.margin!r}")

    @property
    def bound(self) -> float | None:
        """The margin the CI is read against: share × |reference| (effect), the equivalence margin (null), none (direction)."""
        return self.share * abs(self.reference) if self.kind == "effect" else self.margin


def relative_effect(treated: float, baseline: float, ours: float, against: float | None = None) -> float:
    """The reference's effect (`treated` − `against`, default its baseline) relative to its baseline, in the units of our
    baseline `ours`. Our datasets sit at other NDCG levels than the reference's, so its relative change is what an
    effect claim carries over."""
    return (treated - (baseline if against is None else against)) / baseline * ours


def paired_claim(what: str, deltas, conversations=None, **fields) -> Claim:
    """A claim on per-query paired differences: the query-level bootstrap CI at the claim's level (`stats`, seed 0, as the
    studies' tables) and, given each query's conversation, the conversation-level one (`stats.hierarchical_paired_ci`)."""
    d = np.asarray(deltas, dtype=float)
    level = fields.get("level") or LEVELS[fields.get("kind", "effect")]
    zero = np.zeros_like(d)
    ci = stats.paired_delta_ci(d, zero, level=level)
    conv = None
    if conversations is not None:
        conversations = [str(c) for c in conversations]
        h = stats.hierarchical_paired_ci(d, zero, conversations, level=level)
        conv = (h.lo, h.hi)
    sample = {"deltas": d.tolist(), "conversations": conversations}
    return Claim(what, ci.mean, (ci.lo, ci.hi), conversation_ci=conv, sample=sample, **fields)


def replay_claim(rows, arm: str, protocol: str, what: str, baseline: str = "baseline", metric: str = "ndcg@10",
                 **fields) -> Claim:
    """A claim on RIF replay rows (`experiments.rif_sweep`): `arm` − `baseline` on the same queries, seeds and splits,
    the seed mean per query, with the conversation-level CI where query ids name their conversation (`conv:q12`)."""
    d = per_query_delta(rows[rows["protocol"] == protocol], baseline, metric)
    per_query = d[d["arm"] == arm].groupby("query_id")["delta"].mean()  # held out, a query's side varies with the seed
    if per_query.empty:
        raise ValueError(f"no {protocol} rows of arm {arm!r} beside {baseline!r}")
    ids = [str(q) for q in per_query.index.get_level_values("query_id")]
    conversations = [stats.conversation_of(q) for q in ids] if all(":" in q for q in ids) else None
    return paired_claim(what, per_query.to_numpy(), conversations, **{"unit": "queries (seed mean per query)", **fields})


@dataclass(frozen=True)
class Judgement:
    outcome: str  # one of OUTCOMES
    fragile: bool
    reason: str
    claim: Claim

    @property
    def verdict(self) -> str:
        return f"{self.outcome} ({FRAGILE})" if self.fragile else self.outcome

    def as_dict(self, role: str) -> dict:
        """What a Finding lists per claim: the role, the outcome and its reason, and the claim's inputs (so a test can re-judge it)."""
        return json_safe({"role": role, "verdict": self.verdict, "outcome": self.outcome, "fragile": self.fragile,
                          "reason": self.reason, "bound": self.claim.bound, **asdict(self.claim)})


def _excludes_zero(ci: Sequence[float]) -> bool:
    return ci[0] > 0 or ci[1] < 0


def _effect(c: Claim, lo: float, hi: float) -> tuple[str, str]:
    low, high = sorted((c.direction * lo, c.direction * hi))
    m = c.bound
    side = f"{'+' if c.direction > 0 else '−'}{m:.4f}"
    stated = f"claimed: an effect of at least {c.share * 100:.4g} % of the reference's {signed(c.reference)}, i.e. beyond {side}"
    if low >= m:
        return "holds", f"{stated}; the CI clears it"
    if low > 0:
        rest = "its upper end stays below it too" if high < m else "a size beyond it is not excluded either"
        return "smaller than claimed", f"{stated}; the CI clears zero but not the margin ({rest})"
    if high >= m:
        return "inconclusive", f"{stated}; the CI is compatible with both the margin and zero"
    if high < 0:
        return "does not hold", f"{stated}; the CI lies on the opposite side of zero"
    if low > -m:
        return "does not hold", f"{stated}; the CI excludes the margin and lies within ±{m:.4f} of zero (no effect of that size)"
    return "does not hold", f"{stated}; the CI excludes the margin (it cannot tell no effect from a reversal)"


def _null(c: Claim, lo: float, hi: float) -> tuple[str, str]:
    m = c.margin
    stated = f"claimed: no difference beyond ±{m:.4f} (equivalence, TOST at 5 % per side)"
    if -m < lo and hi < m:
        return "holds", f"{stated}; the CI lies inside the margin"
    if lo >= m or hi <= -m:
        return "does not hold", f"{stated}; the CI lies outside the margin"
    return "inconclusive", f"{stated}; the CI crosses the margin"


def _direction(c: Claim, lo: float, hi: float) -> tuple[str, str]:
    low, high = sorted((c.direction * lo, c.direction * hi))
    stated = f"claimed: direction only ({'positive' if c.direction > 0 else 'negative'}; no size is claimed)"
    if low > 0:
        return "holds", f"{stated}; the CI excludes zero on the claimed side"
    if high < 0:
        return "does not hold", f"{stated}; the CI excludes zero on the opposite side"
    return "inconclusive", f"{stated}; the CI includes zero"


_RULES = {"effect": _effect, "null": _null, "direction": _direction}


def _outcome(c: Claim, ci: Sequence[float]) -> tuple[str, str]:
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "untestable", "the interval is undefined (nothing to resample)"
    if lo == hi == 0 and c.kind != "null":
        return "untestable", ("every paired difference is 0 (nothing changed), so no effect of either sign can be read: "
                              "an exact null, not an opposite sign")
    return _RULES[c.kind](c, lo, hi)


def judge(claim: Claim) -> Judgement:
    """The outcome of one claim on its query-level CI, qualified fragile by its conversation-level CI (module docstring)."""
    c = claim
    text = f"{c.what} is {signed(c.delta)}, {percent(c.level)} CI over {c.unit} [{signed(c.ci[0])}, {signed(c.ci[1])}]"
    if c.conversation_ci is not None:
        text += f", conversation-level {percent(c.level)} CI [{signed(c.conversation_ci[0])}, {signed(c.conversation_ci[1])}]"
    if c.untestable:
        return Judgement("untestable", False, f"{text}: untestable, {c.untestable}", c)
    outcome, why = _outcome(c, c.ci)
    reason = f"{text}: {why}"
    fragile = False
    if c.conversation_ci is not None and outcome != "untestable":
        fragile = _excludes_zero(c.ci) and not _excludes_zero(c.conversation_ci)
        if fragile:
            reason += "; fragile: the conversation-level CI includes zero"
        alone = _outcome(c, c.conversation_ci)[0]
        if alone != outcome:
            reason += f" (the conversation-level CI alone reads: {alone})"
    return Judgement(outcome, fragile, reason, c)


def signed(x: float, digits: int = 4) -> str:
    """A signed difference as the generated documents print it, with a typographic minus: +0.0058, −0.0014. A nonzero
    value that would round to ±0.0000 gets the digits that show it (−0.00003): a CI bound's side of zero decides a
    verdict; an exact zero is 0.0000."""
    if x == 0:
        return f"{0:.{digits}f}"
    while round(x, digits) == 0 and digits < 10:
        digits += 1
    return f"{x:+.{digits}f}".replace("-", "−")


def fmt_ci(value: float, ci: Sequence[float], digits: int = 4) -> str:
    return f"{value:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


@dataclass
class Finding:
    """The row of the notebook index: claim, the reference's figure, ours, the verdict of the primary claim, and every
    claim judged (`claims`: the primary first, then the secondary ones, each with its outcome, reason and inputs)."""

    checkpoint: int
    title: str
    claim: str
    reference: str
    ours: str
    verdict: str
    why: str
    numbers: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)
    claims: list = field(default_factory=list)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @classmethod
    def from_claims(cls, primary: Claim, secondary: Sequence[Claim] = (), **fields) -> "Finding":
        """The primary claim decides the verdict; the secondary ones are judged and listed, never combined into it."""
        first = judge(primary)
        rows = [first.as_dict("primary")] + [judge(c).as_dict("secondary") for c in secondary]
        return cls(verdict=first.verdict, why=first.reason, claims=rows, **fields)

    def rejudged(self) -> "Finding":
        """The same claims judged again by the current rule from their recorded inputs: a rule or wording that changed
        after the notebook ran reaches the index without re-executing it (the numbers are the run's)."""
        if not self.claims:
            return self
        rows = [judge(_recorded_claim(row)).as_dict(row["role"]) for row in self.claims]
        return replace(self, verdict=rows[0]["verdict"], why=rows[0]["reason"], claims=rows)

    def markdown(self) -> str:
        text = (f"### Verdict: **{self.verdict}**\n\n**Claim.** {self.claim}\n\n"
                f"**Reference.** {self.reference}\n\n**Ours (95 % CI).** {self.ours}\n\n**Why (primary claim).** {self.why}\n")
        secondary = [c for c in self.claims if c["role"] == "secondary"]
        if secondary:
            text += "\n**Secondary claims** (listed, not part of the verdict):\n\n"
            text += "".join(f"- **{c['verdict']}** ({c['kind']}): {c['reason']}\n" for c in secondary)
        return text

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {MIME: json_safe(asdict(self)), "text/markdown": self.markdown(), "text/plain": f"Verdict: {self.verdict}. {self.why}"}


def _recorded_claim(row: dict) -> Claim:
    """A claim back from its recorded row (`Judgement.as_dict`), whose JSON wrote NaN as None."""
    nan = float("nan")
    data = {f.name: row[f.name] for f in fields(Claim) if f.name in row}
    data["delta"] = nan if data["delta"] is None else data["delta"]
    for name in ("ci", "conversation_ci"):
        if data.get(name) is not None:
            data[name] = tuple(nan if v is None else v for v in data[name])
    return Claim(**data)


def read_finding(ipynb: str | Path) -> Finding | None:
    """The last Finding an executed notebook displayed, or None when it shows none.

    A notebook executed before the verdict words changed raises ValueError (its verdict is not one of VERDICTS).
    """
    nb = json.loads(Path(ipynb).read_text())
    found = None
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if MIME in data:
                found = Finding(**data[MIME])
    return found.rejudged() if found else None
