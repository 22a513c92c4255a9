"""How fleet reports write numbers: one format for the tables, the plots' axes and the progress
line, so the same value always reads the same and a column of them can be compared by eye.

Three significant digits, except that the integer part is never rounded away (141,919 bytes stay
141,919, not 142,000); thousands separators from 1,000; scientific notation only under 0.0001
(``8.57e-5``); a unit after a space. Durations for people (the progress line) are ``45 s``,
``2 min 05 s``, ``1 h 05 min``.
"""

from __future__ import annotations

import math

SIGNIFICANT = 3


def fmt(value: float, unit: str = "", *, signed: bool = False) -> str:
    """``value`` as the report writes it; ``signed`` puts a ``+`` before a positive value (a
    difference), ``unit`` follows after a space."""
    if value == 0:
        value = 0.0  # never "-0"
    if not math.isfinite(value):
        text = str(value)
    elif abs(value) >= 10 ** (SIGNIFICANT - 1):
        text = f"{value:,.0f}"
    else:
        mantissa, _, exponent = f"{value:.{SIGNIFICANT}g}".partition("e")
        text = f"{mantissa}e{int(exponent)}" if exponent else mantissa
    if signed and value > 0:
        text = "+" + text
    return f"{text} {unit}" if unit else text


def duration(seconds: float) -> str:
    """Whole seconds, minutes and hours: ``45 s``, ``2 min 05 s``, ``1 h 05 min``."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"
