"""The fleet board's page: its sort, its page number and the sessions it holds, parsed once from a query string.

A board of a thousand sessions shows PAGE_SIZE rows at a time. The rows a page shows are fixed when it renders: the
page's websocket and its re-sync carry their ids (`rows`), so live updates reach only those rows (a session
elsewhere in the fleet changes the header's counts, never the page), and the order among them is kept by the
browser from each row's rank. A session that ranks onto the page later shows on the next load of the page (its
"re-rank" link): with the default sort, nearest the auto-compact limit first, every step of every session moves
the ranking, and a page whose rows came and went under the reader's cursor would be unusable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from compactweb.converters import MAX_ID

PAGE_SIZE = 50
NEAREST_LIMIT = "limit"  # tokens in the window over the auto-compact limit, highest first (the default)
NEWEST = "newest"
OLDEST = "oldest"
SORTS = {NEAREST_LIMIT: "nearest the limit", NEWEST: "newest", OLDEST: "oldest"}
MAX_PAGE = 1_000_000  # a page number past every fleet (offset pagination: the database skips page × size rows)


def _ids(value: Any) -> tuple[int, ...] | None:
    """A page's session ids, "1,2,3" (at most PAGE_SIZE, malformed ones dropped); None when not given."""
    if value is None:
        return None
    ids = []
    for part in str(value).split(",")[:PAGE_SIZE]:
        part = part.strip()
        if part.isdigit() and 0 < int(part) <= MAX_ID:
            ids.append(int(part))
    return tuple(dict.fromkeys(ids))


def _page_number(value: Any) -> int:
    text = str(value or "").strip()
    return min(int(text), MAX_PAGE) if text.isdigit() and int(text) > 0 else 1


@dataclass(frozen=True)
class FleetPage:
    sort: str = NEAREST_LIMIT
    number: int = 1
    rows: tuple[int, ...] | None = None  # the ids the page holds, when it has rendered already

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> FleetPage:
        """Unknown or malformed values fall back to the first page in the default order."""
        sort = str(query.get("sort") or "").strip()
        return cls(sort=sort if sort in SORTS else NEAREST_LIMIT, number=_page_number(query.get("page")),
                   rows=_ids(query.get("rows")))

    @property
    def offset(self) -> int:
        return (self.number - 1) * PAGE_SIZE

    def as_query(self) -> dict[str, str]:
        """The sort and page number (not the rows: a link to the page ranks it again)."""
        query = {"sort": "" if self.sort == NEAREST_LIMIT else self.sort, "page": "" if self.number == 1 else self.number}
        return {k: str(v) for k, v in query.items() if v}



def fill(summary: Mapping[str, Any]) -> float:
    """A row's tokens in the window over its auto-compact limit (over the window when it has none), as the
    database ranks the default sort (sessions_app.live.selectors): the browser re-orders a page's rows by it after a
    live update."""
    limit = summary.get("auto_compact_limit") or summary.get("context_window") or 0
    return round(int(summary.get("tokens_in_window") or 0) / limit, 6) if limit else 0.0
