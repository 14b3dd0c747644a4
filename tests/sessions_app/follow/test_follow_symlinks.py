"""The follower never leaves its folder (issue 44): a transcript or rollout in the followed folder that is a symlink
to a file outside it is refused, unread, and said so (the follower's log and report, the command's output), by the
local follower and by the shipper alike. Real symlinks on the real filesystem."""

from __future__ import annotations

import logging
from io import StringIO
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import call_command

from sessions_app.models import RolloutLine, Session
from sessions_app.transfer.follow import Follower, rollout_files, sync_folder
from tests.sessions_app.claude_transcript.transcripts import SESSION, conversation_with_two_compactions


@pytest.fixture
def folders(tmp_path):
    """A followed projects folder holding a symlink to a transcript outside it."""
    outside = tmp_path / "elsewhere" / "secret.jsonl"
    outside.parent.mkdir()
    outside.write_bytes(conversation_with_two_compactions().bytes())
    project = tmp_path / "projects" / "-home-dev-project"
    project.mkdir(parents=True)
    link = project / f"{SESSION}.jsonl"
    link.symlink_to(outside)
    return tmp_path / "projects", link, outside


def test_a_symlink_out_of_the_followed_folder_is_refused_unread_and_said(folders, provider, policy, caplog):
    root, link, outside = folders
    assert rollout_files(root) == []
    with caplog.at_level(logging.WARNING, logger="sessions_app.transfer.follow"):
        (result,) = sync_folder(root=root, provider=provider, policy=policy)
    assert result.action == "refused" and "outside the followed folder" in result.detail
    assert str(outside) in result.detail
    assert "outside the followed folder" not in caplog.text  # a result for the caller to say, not said twice
    assert not Session.objects.exists() and not RolloutLine.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_running_follower_refuses_a_symlink_out_once_and_follows_the_real_files(folders, provider, policy,
                                                                                     caplog):
    root, link, _ = folders
    real = root / "-home-dev-other" / "1b2c3d4e-0000-4000-8000-000000000001.jsonl"
    real.parent.mkdir()
    real.write_bytes(conversation_with_two_compactions().bytes().replace(SESSION.encode(), real.stem.encode()))
    follower = Follower(root, provider=provider, policy=policy)
    results = []
    with caplog.at_level(logging.WARNING, logger="sessions_app.transfer.follow"):
        follower.rescan(results.append)
        follower.notify(link)  # a content event naming the link (its target was written)
        follower._sync(follower._queue.get_nowait(), results.append)
        follower.rescan(results.append)
    assert [(r.action, r.path) for r in results] == [("imported", str(real.resolve())), ("refused", str(link))]
    assert "outside the followed folder" not in caplog.text  # the caller says it (the command prints it)
    assert list(Session.objects.values_list("thread_id", flat=True)) == [mock.ANY]
    assert str(Session.objects.get().thread_id) == real.stem


def test_the_follow_command_and_the_shipper_say_they_refuse_a_symlink_out(folders, operator_api, provider, policy):
    from tests.sessions_app.transfer.test_shipped_files import _client_through

    root, link, _ = folders
    out = StringIO()
    call_command("follow_rollouts", str(root), "--once", stdout=out)
    assert f"refused {link}" in out.getvalue() and "outside the followed folder" in out.getvalue()
    shipped = StringIO()
    with mock.patch("sessions_app.transfer.shipper.httpx.Client", _client_through(operator_api)):
        call_command("follow_rollouts", str(root), "--to", "http://server", "--token", "unused", "--name", "ci",
                     "--once", stdout=shipped)
    assert f"refused {link}" in shipped.getvalue() and "outside the followed folder" in shipped.getvalue()
    assert not Session.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_follower_that_no_caller_listens_to_logs_each_refusal_once(folders, provider, policy, caplog):
    root, link, _ = folders
    follower = Follower(root, provider=provider, policy=policy)  # the embedded follower: no on_result
    with caplog.at_level(logging.WARNING, logger="sessions_app.transfer.follow"):
        for _ in range(3):
            follower._sync(link, None)
            follower.rescan()
    assert caplog.text.count("outside the followed folder") == 1


def test_the_follow_command_says_a_refusal_once(folders, provider, policy, caplog):
    root, link, _ = folders
    out = StringIO()
    with caplog.at_level(logging.INFO):
        call_command("follow_rollouts", str(root), "--once", stdout=out)
    said = out.getvalue() + caplog.text  # the command's output and its log reach the same terminal
    assert said.count("outside the followed folder") == 1


@pytest.mark.django_db(transaction=True)
def test_the_follower_resolves_its_folder_once_not_on_every_event_and_file(folders, provider, policy):
    root, link, _ = folders
    real = root / "-home-dev-other" / "1b2c3d4e-0000-4000-8000-000000000001.jsonl"
    real.parent.mkdir()
    real.write_bytes(b"")  # no complete first line: waits, read again at every change
    follower = Follower(root, provider=provider, policy=policy)
    resolved_roots = []
    original = Path.resolve

    def counting(self, *args, **kwargs):
        if self == root:
            resolved_roots.append(self)
        return original(self, *args, **kwargs)

    with mock.patch.object(Path, "resolve", counting):
        for n in range(5):
            real.write_bytes(b"{" * (n + 1))  # a change the follower reads
            follower.notify(real)
            follower._sync(follower._queue.get_nowait(), None)
            follower._sync(link, None)
            follower.rescan()
    assert len(resolved_roots) == 1
