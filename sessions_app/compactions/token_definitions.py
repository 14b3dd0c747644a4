"""What each token figure of a compaction means, defined once: every page that shows one says it with these words
(the `definition` template tag), and the serializers' help texts agree (issue 33: one number per fact).

- Window tokens before / after (Compaction.tokens_before / tokens_after): the session's meter, the figure the
  auto-compact limit is compared with, right before the compaction and right after it installed.
- Window tokens freed (Compaction.tokens_freed): before minus after.
- Codex analytics before / after (CompactionAttempt.tokens_before / tokens_after): Codex's own record of the
  attempt (spec §10); they differ from the window tokens on purpose.
- A rollback's restored estimate: what the meter reads once the history before the compaction is installed again.
- A replay comparison's tokens freed: summed from history estimates on both sides, so the two compare like with like.
"""

from __future__ import annotations

DEFINITIONS = {
    "window_tokens": (
        "Window tokens are the session's meter, what the auto-compact limit is compared with: the server's last "
        "reported usage plus estimates of what came after, base instructions included. Before: right before the "
        "compaction; after: right after it installed (items that arrived while it ran included)."
    ),
    "tokens_freed": (
        "Window tokens freed: window tokens before minus after, the same figure on the session page, the fleet "
        "board, the inspector, the analytics and the API (tokens_freed); negative when the compaction did not reduce."
    ),
    "analytics_tokens": (
        # spec §10 (the fields), §6.3 (the trimmed estimate): cited here, not in the words pages show
        "Codex analytics before/after are Codex's record of the attempt (active_context_tokens_before/after): "
        "before is the server's input tokens for remote v2, or the estimate after trimming tool outputs for "
        "remote v1/v2, else the meter at the start; after is the estimate of the history the compaction built, "
        "without items that arrived while it ran."
    ),
    "restored_estimate": (
        "The restored history's estimate: base instructions plus each restored item's estimate, what the meter "
        "reads right after the rollback (it has no server usage reading yet). The compaction's window tokens "
        "before also counted the server's last usage, so the two differ."
    ),
    "replay_freed": (
        "Tokens freed (history estimates): each compaction's history estimate before minus after (base "
        "instructions plus every item's count, never below 0), summed; both sides are measured the same way, so "
        "they compare with each other, not with the window tokens the inspector shows (API: tokens_saved)."
    ),
}
