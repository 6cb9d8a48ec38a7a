"""Student t's quantiles: the two-sided 95% one (`t975`) for a window's interval, and any one at a normal quantile
(`t_quantile`), exact at the few degrees of freedom a slow trainer's window holds.
"""

from __future__ import annotations

import functools
import math

Z95 = 1.959964  # the two-sided 95% interval's normal quantile
EXACT_T_DF = 100  # `t_quantile` is exact below this many degrees of freedom
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)  # Student t, 97.5%, df 1-10


def t975(df: int) -> float:
    """Student t's 97.5% quantile; a table to 10 degrees of freedom, the Cornish-Fisher expansion beyond."""
    if df <= len(T975):
        return T975[df - 1]
    return t_quantile(df, 1.959964)


def t_quantile(df: float, z: float) -> float:
    """Student t's quantile at the normal quantile `z`: exact to `EXACT_T_DF` degrees of freedom (a fractional count
    taken down to the whole one below, the wider quantile), by bisection on t's distribution function
    (`_t_within`); the Cornish-Fisher expansion beyond (within 0.1% there). The expansion alone falls short at a
    few degrees of freedom (5.19 for 5.84 at 3, the one-sided 0.5% quantile), where a pool of a few steps is all a
    slow trainer's case holds."""
    if df >= EXACT_T_DF:
        return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    return _t_exact(max(1, math.floor(df)), z)


@functools.lru_cache(maxsize=1024)
def _t_exact(nu: int, z: float) -> float:
    target = math.erf(abs(z) / math.sqrt(2.0))  # P(|N| < |z|)
    lo, hi = 0.0, 1.0
    while _t_within(hi, nu) < target:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if _t_within(mid, nu) < target else (lo, mid)
    return math.copysign((lo + hi) / 2.0, z)


def _t_within(t: float, nu: int) -> float:
    """P(|T| < t) for Student t with `nu` (whole) degrees of freedom, in closed form (a finite series in
    cos(theta), theta = atan(t / sqrt(nu)))."""
    theta = math.atan(t / math.sqrt(nu))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if nu % 2 == 0:  # 1 + c2/2 + (1*3)/(2*4) c2^2 + ... up to c2^((nu-2)/2)
        term = total = 1.0
        for i in range(1, nu // 2):
            term *= (2 * i - 1) / (2 * i) * c2
            total += term
        return s * total
    term = total = 0.0  # odd: (2/pi)(theta + s (c + (2/3) c^3 + ... up to c^(nu-2)))
    if nu > 1:
        term = total = math.cos(theta)
        for i in range(1, (nu - 1) // 2):
            term *= (2 * i) / (2 * i + 1) * c2
            total += term
    return 2.0 / math.pi * (theta + s * total)
