"""A Claude Code compaction's summary requests are its call tokens, for imported and followed sessions, and they
survive export and re-import (issue 44). Claude Code writes no transcript entry for its summary requests; its
`cost-state` line (written at the end of every run) counts every request of the session, so what it counted since
the previous one beyond the usage of the assistant messages in between is what the compaction's calls spent. The
figures below are shaped like the pinned CLI's (2.1.332): about 24k tokens for the two summary requests of a
compaction."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile

from compaction_app.models import Compaction
from sessions_app.models import Session
from sessions_app.transfer import exporter
from sessions_app.transfer.follow import sync_file
from tests.sessions_app.claude_transcript.transcripts import SESSION, Transcript, text

USAGE = {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 9000,
         "output_tokens": 20}  # 9,120 per assistant message


class Costed:
    """A transcript whose `cost-state` lines count the session's requests as Claude Code does: every assistant
    message's usage, plus each compaction's summary requests (which have no entry of their own)."""

    def __init__(self) -> None:
        self.t = Transcript()
        self.input = self.read = self.output = 0
        self.runs = 0

    def answer(self, prompt: str) -> None:
        self.t.user(prompt)
        self.runs += 1
        self.t.assistant([text(f"Done: {prompt}")], message_id=f"msg_{self.runs}", usage=USAGE)
        self._count(9100, 9000, 20)

    def compact(self, trigger: str, *, summary_input: int, summary_output: int) -> None:
        self.t.boundary(trigger, 9500)
        self.t.summary(f"Summary after {self.runs} prompts.")
        self._count(summary_input, 0, summary_output)

    def _count(self, total_input: int, read: int, output: int) -> None:
        self.input += total_input
        self.read += read
        self.output += output

    def end_run(self) -> None:
        self.t.bookkeeping("cost-state", totalCostUSD=0.1, modelUsage={"claude-sonnet-4-5": {
            "inputTokens": self.input - self.read, "outputTokens": self.output, "cacheReadInputTokens": self.read,
            "cacheCreationInputTokens": 0, "thinkingTokens": 0}})


def _session() -> Costed:
    c = Costed()
    c.answer("fix parser bug 3")
    c.end_run()
    c.answer("write the loader docs")
    c.compact("auto", summary_input=23_000, summary_output=1_179)  # two ~12k summary requests: 24,179 tokens
    c.answer("check the tests")
    c.end_run()
    c.compact("manual", summary_input=21_500, summary_output=709)  # a /compact run of its own: 22,209 tokens
    c.end_run()
    c.answer("add a changelog entry")
    c.compact("auto", summary_input=11_000, summary_output=600)  # two compactions in one run: split evenly
    c.answer("review the docs")
    c.compact("auto", summary_input=11_000, summary_output=600)
    c.end_run()
    return c


def _costs(api, session_id: int) -> list[tuple[str, int, int]]:
    rows = Compaction.objects.filter(session_id=session_id).order_by("rollout_seq")
    details = [api.get(f"/api/v1/compactions/{c.pk}").json() for c in rows]
    return [(d["trigger"], d["cost"]["call_tokens"], d["cost"]["net_tokens"]) for d in details]


def test_an_imported_claude_sessions_compactions_cost_their_summary_requests_and_survive_export_and_reimport(
    operator_api, provider, policy
):
    data = _session().t.bytes()
    response = operator_api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(f"{SESSION}.jsonl", data)})
    assert response.status_code == 201, response.content
    session_id = response.json()["session"]
    costs = _costs(operator_api, session_id)
    assert [(trigger, call) for trigger, call, _ in costs] == [
        ("auto", 24_179), ("manual", 22_209), ("auto", 11_600), ("auto", 11_600)]
    # One or two requests after each: far less saved than the summary requests cost (counted 0, the net was > 0).
    assert all(net < 0 for _, _, net in costs)

    exported = b"".join(x.encode() for x in exporter.export_rollout(session=Session.objects.get(pk=session_id)))
    assert exported == data
    again = operator_api.post("/api/v1/sessions/import", {"file": SimpleUploadedFile(f"{SESSION}.jsonl", exported),
                                                          "new_thread_id": "true"})
    assert again.status_code == 201, again.content
    assert _costs(operator_api, again.json()["session"]) == costs


def test_a_followed_claude_session_learns_a_compactions_cost_when_the_run_ends(tmp_path, operator_api, provider,
                                                                               policy):
    lines = _session().t.bytes().splitlines(keepends=True)
    path = tmp_path / f"{SESSION}.jsonl"
    written = 0
    session_id = None
    for end in range(3, len(lines) + 1, 3):  # Claude Code appends a few lines at a time
        with path.open("ab") as fh:
            fh.write(b"".join(lines[written:end]))
        written = end
        session_id = sync_file(path=path).session_id or session_id
    with path.open("ab") as fh:
        fh.write(b"".join(lines[written:]))
    sync_file(path=path)
    assert [(trigger, call) for trigger, call, _ in _costs(operator_api, session_id)] == [
        ("auto", 24_179), ("manual", 22_209), ("auto", 11_600), ("auto", 11_600)]


def test_a_transcript_without_cost_state_lines_leaves_its_compactions_cost_unknown(operator_api, provider, policy):
    c = Costed()
    c.answer("fix parser bug 3")
    c.compact("auto", summary_input=23_000, summary_output=1_179)
    c.answer("go on")
    response = operator_api.post("/api/v1/sessions/import",
                                 {"file": SimpleUploadedFile(f"{SESSION}.jsonl", c.t.bytes())})
    assert response.status_code == 201
    assert [call for _, call, _ in _costs(operator_api, response.json()["session"])] == [0]
