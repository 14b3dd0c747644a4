"""Live follow of a Claude Code projects folder (issue 35): a transcript written piece by piece is imported, its
appended lines placed in its tree (compactions with their triggers), and a restarted follower (no reader kept in
memory) goes on with nothing lost or doubled."""

from __future__ import annotations

from pathlib import Path

from compaction_app.models import Compaction
from sessions_app.models import RolloutLine, Session
from sessions_app.rollout.services import verify_projection
from sessions_app.transfer import claude_follow, exporter, importer
from sessions_app.transfer.follow import rollout_files, sync_file
from tests.sessions_app.claude_transcript.transcripts import SESSION, conversation_with_two_compactions


def _rows(session) -> list[tuple[str, dict]]:
    return list(RolloutLine.objects.filter(session=session).exclude(kind="session_meta").order_by("seq")
                .values_list("kind", "payload"))


def test_a_transcript_written_piece_by_piece_and_followed_across_a_restart_equals_its_import(tmp_path, provider,
                                                                                            policy):
    project = tmp_path / "projects" / "-home-dev-project"
    project.mkdir(parents=True)
    path = project / f"{SESSION}.jsonl"
    (project / SESSION / "subagents").mkdir(parents=True)
    (project / SESSION / "subagents" / "agent-a1.jsonl").write_bytes(b"{}\n")

    lines = conversation_with_two_compactions().bytes().splitlines(keepends=True)
    cut = [4, 11, 13, 18, len(lines)]  # the first compaction's boundary and summary arrive in different syncs
    written = 0
    actions = []
    for n, end in enumerate(cut):
        with path.open("ab") as fh:
            fh.write(b"".join(lines[written:end]))
        written = end
        if n == 2:
            claude_follow.forget_readers()  # a restarted follower: the tree is read back from the kept lines
        actions.append(sync_file(path=Path(path)).action)
    with path.open("ab") as fh:
        fh.write(b'{"type":"user","message":{"role":"user","con')  # Claude Code is writing a line
    actions.append(sync_file(path=path).action)
    assert actions == ["imported", "appended", "appended", "appended", "appended", "waiting"]
    assert rollout_files(tmp_path / "projects") == [path]  # a subagent's file is not a session of its own

    session = Session.objects.get(source="followed")
    assert [c.trigger for c in Compaction.objects.filter(session=session).order_by("rollout_seq")] == ["auto", "manual"]
    assert verify_projection(session=session) == []
    data = b"".join(lines)
    fresh = importer.do_import_rollout(lines=lines, source_name=path.name, new_thread_id=True).session
    assert _rows(session) == _rows(fresh)
    assert "".join(exporter.export_rollout(session=session)).encode() == data


def test_a_followed_transcripts_subagent_files_are_listed_on_its_session_page(tmp_path, provider, policy, client,
                                                                              operator_user):
    project = tmp_path / "projects" / "-home-dev-project"
    (project / SESSION / "subagents").mkdir(parents=True)
    (project / SESSION / "subagents" / "agent-a1.jsonl").write_bytes(b'{"isSidechain":true}\n')
    (project / f"{SESSION}.jsonl").write_bytes(conversation_with_two_compactions().bytes())
    result = sync_file(path=project / f"{SESSION}.jsonl")
    assert result.action == "imported"
    assert [p.name for p in rollout_files(tmp_path / "projects")] == [f"{SESSION}.jsonl"]  # not a session itself
    client.force_login(operator_user)
    page = client.get(f"/sessions/{result.session_id}/").content.decode()
    assert 'data-subagents="1"' in page and "<code>agent-a1.jsonl</code>" in page
