"""`import_rollouts` walks a sessions/YYYY/MM/DD tree: one transaction per file, bad files reported with their bad
lines while the others are imported, already-imported threads skipped, non-zero exit when any file failed."""

import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import RolloutLine, Session

ROLLOUTS = __import__("pathlib").Path(__file__).resolve().parents[2] / "fixtures" / "rollouts"


@pytest.fixture
def sessions_tree(tmp_path):
    day = tmp_path / "sessions" / "2026" / "04" / "19"
    day.mkdir(parents=True)
    shutil.copy(ROLLOUTS / "basic_session.jsonl", day / "rollout-2026-04-19T10-37-00-a.jsonl")
    shutil.copy(ROLLOUTS / "truncated_last_line.jsonl", day / "rollout-2026-04-19T10-38-00-b.jsonl")
    other = tmp_path / "sessions" / "2026" / "04" / "20"
    other.mkdir(parents=True)
    shutil.copy(ROLLOUTS / "compactions.jsonl", other / "rollout-2026-04-20T09-00-00-c.jsonl")
    return tmp_path / "sessions"


def test_good_files_are_imported_and_a_bad_one_is_reported_with_its_line(sessions_tree, provider, policy):
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 file\\(s\\) could not be imported"):
        call_command("import_rollouts", str(sessions_tree), "--policy", policy.name, "--strict", stdout=out, stderr=err)
    assert "2 imported, 0 already imported, 1 failed, of 3 file(s)" in out.getvalue()
    assert "rollout-2026-04-19T10-38-00-b.jsonl: nothing imported; 1 bad line(s)" in err.getvalue()
    assert "line 4: invalid JSON" in err.getvalue()
    assert Session.objects.filter(source="imported").count() == 2


def test_stop_on_error_stops_at_the_bad_file(sessions_tree, provider, policy):
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("import_rollouts", str(sessions_tree), "--stop-on-error", "--strict", stdout=out,
                     stderr=StringIO())
    assert "1 imported, 0 already imported, 1 failed, of 3 file(s)" in out.getvalue()


def test_a_second_run_skips_threads_already_imported(sessions_tree, provider, policy):
    good = sessions_tree / "2026" / "04" / "20"
    call_command("import_rollouts", str(good), stdout=StringIO())
    lines = RolloutLine.objects.count()
    out = StringIO()
    call_command("import_rollouts", str(good), stdout=out)
    assert "0 imported, 1 already imported, 0 failed" in out.getvalue()
    assert "already imported as session" in out.getvalue()
    assert RolloutLine.objects.count() == lines


def test_an_unknown_path_or_provider_is_a_clear_error(tmp_path, provider, policy):
    with pytest.raises(CommandError, match="no such file or folder"):
        call_command("import_rollouts", str(tmp_path / "missing"), stdout=StringIO())
    with pytest.raises(CommandError, match="no provider 'nope'"):
        call_command("import_rollouts", str(tmp_path), "--provider", "nope", stdout=StringIO())


def test_a_line_past_the_line_limit_refuses_its_file_and_the_others_are_imported(sessions_tree, provider, policy,
                                                                                   settings):
    settings.COMPACTWEB_MAX_IMPORT_LINE_BYTES = 10_000
    day = sessions_tree / "2026" / "04" / "19"
    long_line = ('{"timestamp":"2026-04-19T10:40:00.000Z","type":"response_item","payload":{"type":"message",'
                 '"role":"user","content":[{"type":"input_text","text":"' + "x" * 20_000 + '"}]}}\n')
    data = (ROLLOUTS / "basic_session.jsonl").read_bytes() + long_line.encode()
    (day / "rollout-2026-04-19T10-39-00-d.jsonl").write_bytes(data)
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="1 file\\(s\\) could not be imported"):
        call_command("import_rollouts", str(sessions_tree), "--new-thread-id", stdout=out, stderr=err)
    assert "rollout-2026-04-19T10-39-00-d.jsonl: nothing imported; 1 bad line(s)" in err.getvalue()
    long_no = data.count(b"\n")
    assert (f"line {long_no}: the line is longer than 10000 bytes (the import's line limit, "
            "COMPACTWEB_MAX_IMPORT_LINE_BYTES)") in err.getvalue()
    assert "3 imported, 0 already imported, 1 failed, of 4 file(s)" in out.getvalue()
    assert Session.objects.count() == 3  # the refused file left nothing behind
