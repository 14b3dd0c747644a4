"""What other apps may hear of a committed append (the gateway: a rollback or a pin change of its sessions), and of
a lease whose holder died.

The live event of an append does not go through here: the append publishes it itself
(sessions_app.rollout.services.announce_committed).
"""

from django.dispatch import Signal

# Sent once per append transaction, after commit, with kwargs:
#   session_id (int); seqs (the new lines' seqs, ascending);
#   lines (one (seq, kind, event type or None) per new line: enough to describe them without reading them back);
#   summary (sessions_app.rollout.selectors.session_summary of the session as that transaction left it).
rollout_appended = Signal()

# Sent inside the transaction that takes over or reaps an expired lease (its holder died or stopped renewing), with
# kwargs: session_id (int). The turns room ends the turn the dead holder left open (sessions_app.turns.ends).
holder_lost = Signal()
