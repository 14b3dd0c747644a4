"""Signals other parts subscribe to (the event publisher, the UI): sent after the transaction commits."""

from django.dispatch import Signal

# Sent once per append transaction, after commit, with kwargs:
#   session_id (int); seqs (the new lines' seqs, ascending);
#   lines (one (seq, kind, event type or None) per new line: enough to describe them without reading them back);
#   summary (sessions_app.rollout.selectors.session_summary of the session as that transaction left it).
rollout_appended = Signal()
