"""Claude Code transcript lines for tests, shaped like the pinned CLI's (2.1.332) output: tree entries with
`uuid` / `parentUuid` / `sessionId`, one assistant entry per content block with the message's usage, attachments
in the chain, bookkeeping lines outside it, compact boundaries with `compactMetadata`."""

from __future__ import annotations

import itertools
import json

SESSION = "2e3879cd-1426-4b0b-ba41-01a02dba7e6e"
_counter = itertools.count(1)


def uid() -> str:
    return f"00000000-0000-4000-8000-{next(_counter):012d}"


class Transcript:
    """Builds a transcript entry by entry; each entry's parent is the previous tree entry unless given."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.leaf: str | None = None
        self.second = 0

    def _stamp(self) -> str:
        self.second += 1
        return f"2026-12-02T22:{self.second // 60:02d}:{self.second % 60:02d}.000Z"

    def _tree(self, kind: str, parent: str | None = ..., **fields) -> str:
        uuid = uid()
        entry = {"parentUuid": self.leaf if parent is ... else parent, "isSidechain": False, "type": kind,
                 **fields, "uuid": uuid, "timestamp": self._stamp(), "cwd": "/home/dev/project",
                 "sessionId": SESSION, "version": "2.1.332"}
        self.lines.append(entry)
        if not entry["isSidechain"]:
            self.leaf = uuid
        return uuid

    def user(self, content, parent=..., **fields) -> str:
        return self._tree("user", parent, message={"role": "user", "content": content}, **fields)

    def assistant(self, blocks, *, message_id: str, usage: dict | None = None, parent=..., **fields) -> list[str]:
        """One entry per block, as Claude Code writes them."""
        usage = usage or {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 9000,
                          "output_tokens": 20}
        uuids = []
        for n, block in enumerate(blocks):
            uuids.append(self._tree("assistant", parent if n == 0 else ..., message={
                "id": message_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [block], "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
                "usage": usage}, **fields))
        return uuids

    def attachment(self, kind: str = "date") -> str:
        return self._tree("attachment", attachment={"type": kind, "date": "2026-12-02"},
                          rendered=[{"content": "<system-reminder>\nToday's date is 2026-12-02.\n</system-reminder>"}])

    def boundary(self, trigger: str, pre_tokens: int, preserved: list[str] | None = None) -> str:
        metadata = {"trigger": trigger, "preTokens": pre_tokens, "postTokens": 600}
        if preserved:
            metadata["preservedMessages"] = {"anchorUuid": "", "uuids": preserved, "allUuids": preserved}
        return self._tree("system", None, subtype="compact_boundary", content="Conversation compacted",
                          isMeta=False, level="info", compactMetadata=metadata, logicalParentUuid=self.leaf)

    def summary(self, text: str) -> str:
        return self.user("This session is being continued from a previous conversation that ran out of context. "
                         f"The summary below covers the earlier portion of the conversation.\n\n{text}",
                         isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def bookkeeping(self, kind: str, **fields) -> None:
        self.lines.append({"type": kind, "sessionId": SESSION, **fields})

    def sidechain(self, text: str) -> None:
        self.lines.append({"parentUuid": None, "isSidechain": True, "type": "user", "agentId": "a1",
                           "message": {"role": "user", "content": text}, "uuid": uid(),
                           "timestamp": self._stamp(), "sessionId": SESSION})

    def bytes(self) -> bytes:
        return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in self.lines)


def tool_use(call_id: str, command: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}


def tool_result(call_id: str, output: str) -> list[dict]:
    return [{"tool_use_id": call_id, "type": "tool_result", "content": output, "is_error": False}]


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def conversation_with_two_compactions() -> Transcript:
    """Two prompts with Bash calls, an auto compaction inside the second (it keeps the running tool call), a
    third prompt, a manual /compact, a fourth prompt; attachments, bookkeeping and a subagent along the way."""
    t = Transcript()
    t.bookkeeping("queue-operation", operation="enqueue", content="fix parser bug 3")
    t.user("fix parser bug 3")
    t.attachment()
    t.assistant([text("Looking."), tool_use("toolu_1", "ls -a")], message_id="msg_1")
    t.user(tool_result("toolu_1", ".\n.."))
    t.assistant([text("Done with bug 3.")], message_id="msg_2")
    t.bookkeeping("last-prompt", lastPrompt="fix parser bug 3", leafUuid=t.leaf)
    t.user("write the loader docs")
    call = t.assistant([tool_use("toolu_2", "cat notes.txt")], message_id="msg_3")
    result = t.user(tool_result("toolu_2", "bug 3 fixed"))
    t.sidechain("subagent: look for the loader")
    t.boundary("auto", 9562, preserved=[*call, result])
    t.attachment()
    t.summary("Goals: fix parser bug 3; write the loader docs.")
    t.assistant([text("Docs written.")], message_id="msg_4")
    t.user("check the tests")
    t.assistant([text("Tests pass.")], message_id="msg_5")
    t.boundary("manual", 9400)
    t.summary("Goals: bug 3, docs, tests.")
    t.user("add a changelog entry")
    t.assistant([text("Added.")], message_id="msg_6")
    t.bookkeeping("cost-state", totalCostUSD=0.1)
    return t
