"""Nearest-rank percentiles (the analytics page's latency figures). Plain Python."""

from __future__ import annotations

import math


def percentile(sorted_values: list[int], q: float) -> float | None:
    """Nearest-rank percentile of already sorted values (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return float(sorted_values[rank - 1])
