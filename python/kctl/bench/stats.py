"""The statistics of fleet reports, as small pure functions of plain numbers.

Each takes either the values themselves or the aggregates a query engine computes (count, mean,
sample standard deviation, counts of signs), so the same code serves rows held in memory and
aggregates computed elsewhere (Spark SQL). Nothing here needs scipy: the one distribution used,
Student's t, is evaluated exactly for the degrees of freedom a fleet of up to a thousand seeds has.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
"""The confidence level of the report's intervals."""

EXACT_T_UP_TO = 1000
"""Degrees of freedom up to which Student's t is evaluated exactly; beyond, the Cornish-Fisher
expansion in 1/df (Abramowitz & Stegun 26.7.5) is correct to far more digits than are printed."""


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0…100) of a non-empty sequence: the value of rank
    ⌈q·n/100⌉ (what Spark's ``percentile_approx`` returns at full accuracy)."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered) / 100) - 1))]


def t_central_probability(t: float, df: int) -> float:
    """P(-t < T < t) for Student's T with ``df`` degrees of freedom, ``t`` ≥ 0: the finite
    series of Abramowitz & Stegun 26.7.3 (odd df) and 26.7.4 (even df), exact for integer df."""
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:
        term = total = math.cos(theta)
        for k in range(1, (df - 1) // 2):
            term *= 2 * k / (2 * k + 1) * cos2
            total += term
        return 2 / math.pi * (theta + (math.sin(theta) * total if df > 1 else 0.0))
    term = total = 1.0
    for k in range(1, df // 2):
        term *= (2 * k - 1) / (2 * k) * cos2
        total += term
    return math.sin(theta) * total


@functools.lru_cache(maxsize=64)
def t_quantile(p: float, df: int) -> float:
    """The ``p``-quantile (``p`` in (0.5, 1)) of Student's t with ``df`` ≥ 1 degrees of freedom."""
    if df > EXACT_T_UP_TO:
        z: float = statistics.NormalDist().inv_cdf(p)
        terms = ((z**3 + z) / 4, (5 * z**5 + 16 * z**3 + 3 * z) / 96,
                 (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
                 (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160)
        return z + math.fsum(g / df ** (k + 1) for k, g in enumerate(terms))
    target = 2 * p - 1  # the central probability below the quantile
    low, high = 0.0, 1.0
    while t_central_probability(high, df) < target:
        low, high = high, 2 * high
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if t_central_probability(middle, df) < target else (low, middle)
    return (low + high) / 2


def mean_interval(n: int, mean: float, sd: float) -> tuple[float, float] | None:
    """The t-based :data:`CONFIDENCE` interval of a mean from ``n`` values with sample standard
    deviation ``sd``; None for fewer than two values (no spread to judge by)."""
    if n < 2:
        return None
    half = t_quantile((1 + CONFIDENCE) / 2, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


@dataclass(frozen=True)
class PairedDifference:
    """One metric of one variant against the first, over the seeds both ran: the differences'
    count, mean and sample standard deviation, and how many were negative (better, every metric
    being "lower is better"), zero or positive."""

    n: int
    mean: float
    sd: float
    better: int
    same: int
    worse: int

    @property
    def interval(self) -> tuple[float, float] | None:
        return mean_interval(self.n, self.mean, self.sd)


def paired_difference(differences: Sequence[float]) -> PairedDifference:
    """The aggregates of per-seed differences (variant minus first variant); at least one."""
    return PairedDifference(
        len(differences), statistics.fmean(differences),
        statistics.stdev(differences) if len(differences) > 1 else 0.0,
        sum(d < 0 for d in differences), sum(d == 0 for d in differences), sum(d > 0 for d in differences))
