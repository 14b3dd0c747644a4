"""Data retention (issue 34, docs/retention-policy.md): ended sessions archived to compressed JSON Lines files equal
to their export, then removed from the database; restorable by import."""
