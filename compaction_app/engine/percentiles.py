"""Nearest-rank percentiles (the analytics page's latency figures). Plain Python."""

from __future__ import annotations

import math


def nearest_rank(count: int, q: float) -> int:
    """The 1-based rank of the q-th percentile among `count` sorted values (0 when there are none)."""
    if count <= 0:
        return 0
    return max(1, math.ceil(q / 100 * count))

