"""A checkpoint notebook's finding: what its verdict cell shows and what `make notebooks` reads back.

The verdict is computed, never typed: `judge` turns a paired difference with its 95 % CI into
"holds" / "partly" / "does not hold", and a notebook combines such judgements in its last cell.
The `Finding` displays as markdown and carries its fields under a private MIME type, so the
notebook index (`lethe_core.report.notebooks`) is filled from the executed outputs themselves.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from lethe_core.results.store import json_safe

MIME = "application/vnd.lethe.finding+json"
VERDICTS = ("holds", "partly", "does not hold")


@dataclass
class Judgement:
    verdict: str  # one of VERDICTS
    reason: str


def judge(delta: float, ci: Sequence[float], direction: int = +1, what: str = "the difference") -> Judgement:
    """A claimed effect of sign `direction` against its paired 95 % CI.

    holds: the CI excludes 0 on the claimed side; does not hold: the CI excludes 0 on the other
    side, or the point estimate has the wrong sign; partly: right sign, CI includes 0.
    """
    lo, hi = float(ci[0]), float(ci[1])
    signed = [direction * x for x in (delta, lo, hi)]
    d, lo_s, hi_s = signed[0], min(signed[1:]), max(signed[1:])
    text = f"{what} is {delta:+.4f} [{lo:+.4f}, {hi:+.4f}]"
    if lo_s > 0:
        return Judgement("holds", f"{text}: the 95 % CI excludes zero on the claimed side")
    if hi_s < 0:
        return Judgement("does not hold", f"{text}: the 95 % CI excludes zero on the opposite side")
    if d > 0:
        return Judgement("partly", f"{text}: the sign agrees but the 95 % CI includes zero")
    return Judgement("does not hold", f"{text}: the point estimate has the opposite sign and the CI includes zero")


def combine(judgements: Sequence[Judgement]) -> Judgement:
    """All hold -> holds; none holds or partly -> does not hold; otherwise partly. Reasons are joined."""
    verdicts = {j.verdict for j in judgements}
    if verdicts == {"holds"}:
        verdict = "holds"
    elif verdicts == {"does not hold"}:
        verdict = "does not hold"
    else:
        verdict = "partly"
    return Judgement(verdict, "; ".join(j.reason for j in judgements))


def fmt_ci(value: float, ci: Sequence[float], digits: int = 4) -> str:
    return f"{value:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


@dataclass
class Finding:
    """The row of the notebook index: claim, the reference's figure, ours with a 95 % CI, the verdict."""

    checkpoint: int
    title: str
    claim: str
    reference: str
    ours: str
    verdict: str
    why: str
    numbers: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @classmethod
    def from_judgement(cls, judgement: Judgement, **fields) -> "Finding":
        return cls(verdict=judgement.verdict, why=judgement.reason, **fields)

    def markdown(self) -> str:
        return (f"### Verdict: **{self.verdict}**\n\n**Claim.** {self.claim}\n\n"
                f"**Reference.** {self.reference}\n\n**Ours (95 % CI).** {self.ours}\n\n**Why.** {self.why}\n")

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {MIME: json_safe(asdict(self)), "text/markdown": self.markdown(), "text/plain": f"Verdict: {self.verdict}. {self.why}"}


def read_finding(ipynb: str | Path) -> Finding | None:
    """The last Finding an executed notebook displayed, or None when it shows none."""
    nb = json.loads(Path(ipynb).read_text())
    found = None
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if MIME in data:
                found = Finding(**data[MIME])
    return found
