"""Signals other parts subscribe to (the event publisher, the UI): sent after the transaction commits."""

from django.dispatch import Signal

# Sent once per append transaction, after commit: kwargs session_id (int) and seqs (list of the new line seqs).
rollout_appended = Signal()
