"""Imported Codex rollouts get retention scores like live compactions, in the background after the import commits:
a local compaction is scored, a remote one whose window is an encrypted item is "opaque: not scored" (never 0%)."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import Compaction
from sessions_app.compactions.scoring import do_score_session


def _import(api, rollout_bytes, name, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(name, rollout_bytes(name))})
    assert response.status_code == 201, response.content
    return response.json()["session"], callbacks


def test_an_imported_local_compaction_is_scored_after_the_import(
    support_api, rollout_bytes, provider, policy, django_capture_on_commit_callbacks
):
    session_id, callbacks = _import(support_api, rollout_bytes, "codex_0169_local_compaction.jsonl",
                                    django_capture_on_commit_callbacks)
    # Not on the import's path: the rows are unscored when the import answers, a job is queued on commit.
    assert callbacks and all(c.retention is None for c in Compaction.objects.filter(session_id=session_id))
    assert do_score_session(session_id=session_id) == Compaction.objects.filter(session_id=session_id).count()
    compaction = Compaction.objects.filter(session_id=session_id).first()
    assert compaction.retention["total"] > 0 and compaction.retention["opaque"] is False
    assert compaction.retention_score is not None
    kinds = {f["kind"] for f in compaction.retention["facts"]}
    assert "command" in kinds  # exec_command with "Process exited with code N"
    assert do_score_session(session_id=session_id) == 0  # scored once
    detail = support_api.get(f"/api/v1/compactions/{compaction.pk}").json()
    assert detail["retention"]["score"] == compaction.retention_score


def test_an_imported_remote_compaction_is_opaque_not_zero(
    support_api, rollout_bytes, provider, policy, django_capture_on_commit_callbacks
):
    session_id, _ = _import(support_api, rollout_bytes, "codex_0169_remote_v2_compaction.jsonl",
                            django_capture_on_commit_callbacks)
    do_score_session(session_id=session_id)
    compaction = Compaction.objects.filter(session_id=session_id).first()
    assert compaction.retention["opaque"] is True
    assert compaction.retention_score is None and compaction.retention["score"] is None
    assert compaction.retention["visible_score"] is not None


def test_an_imported_session_can_be_pinned_and_its_window_shows_the_pin(
    support_api, rollout_bytes, provider, policy, django_capture_on_commit_callbacks
):
    from compaction_app.engine.items import message_text
    from compaction_app.engine.pins import is_pinned_block
    from sessions_app.models import Session
    from sessions_app.rollout import selectors

    session_id, _ = _import(support_api, rollout_bytes, "codex_0169_local_compaction.jsonl",
                            django_capture_on_commit_callbacks)
    pinned = support_api.post(f"/api/v1/sessions/{session_id}/pins", {"text": "Keep notes.txt sorted"}, format="json")
    assert pinned.status_code == 201, pinned.json()
    window = list(selectors.live_items(session=Session.objects.get(pk=session_id)))
    assert is_pinned_block(window[-1]) and "Keep notes.txt sorted" in message_text(window[-1])
