"""Row locks on a session, taken in the one order docs/architecture.md ("Row locks") sets.

A session's work locks its own Session row and nothing shared: `SELECT ... FOR UPDATE` with a join locks every
joined row, so a plain `select_for_update().select_related("provider", "policy")` also locked the provider and
policy rows that every other session of that policy references. Each insert of a row pointing at the policy
(an attempt, a compaction) takes a KEY SHARE lock on it, which waits for that FOR UPDATE; with the shared roll-up
rows upserted in the same transactions, policy row against roll-up row gave PostgreSQL deadlocks (issue 42).
`of=("self",)` locks the session row alone; the provider and policy are read in the same statement.
"""

from __future__ import annotations

from sessions_app.models import Session


def lock_session(*, session_id: int, with_config: bool = False) -> Session:
    """The session's row, locked FOR UPDATE until the caller's transaction ends; `with_config` reads its provider
    and policy in the same statement without locking them."""
    rows = Session.objects.select_for_update(of=("self",))
    if with_config:
        rows = rows.select_related("provider", "policy")
    return rows.get(pk=session_id)
