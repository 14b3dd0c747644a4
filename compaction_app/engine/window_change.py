"""What a compaction changed in the window: which items of the old history the new one kept (matched by
content, each at most once), which left, and which are new. Plain Python: the inspector's diff."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from compaction_app.engine.items import Item


def _key(item: Item) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def window_change(before: list[tuple[Item, int]], after: list[tuple[Item, int]]) -> dict[str, Any]:
    """Which items of the old history were kept in the new one (matched by content, each at most once), which
    left the window, and which are new (summary, compaction item, injected context), with token counts."""
    remaining: dict[str, list[int]] = defaultdict(list)
    for index, (item, _) in enumerate(after):
        remaining[_key(item)].append(index)
    kept, left = [], []
    matched: set[int] = set()
    for index, (item, tokens) in enumerate(before):
        slots = remaining.get(_key(item))
        if slots:
            target = slots.pop(0)
            matched.add(target)
            kept.append({"before_index": index, "after_index": target, "tokens": tokens, "item": item})
        else:
            left.append({"before_index": index, "tokens": tokens, "item": item})
    new = [{"after_index": i, "tokens": t, "item": item} for i, (item, t) in enumerate(after) if i not in matched]
    return {
        "kept": kept,
        "left": left,
        "new": new,
        "kept_tokens": sum(k["tokens"] for k in kept),
        "left_tokens": sum(k["tokens"] for k in left),
        "new_tokens": sum(k["tokens"] for k in new),
    }
