"""Sessions on the scripted provider, driven through the JSON API (the public path of the Codex-fidelity tests).

`ScriptedSessions` creates a Provider and a CompactionPolicy row pointing at a served `ScriptedProvider`, then
creates the session with `POST /api/v1/sessions` and runs turns with `POST /api/v1/sessions/<id>/turns`, so every
rule is checked where a user meets it. Replies are built with `text_reply` / `items_reply` / `compaction_reply`.
"""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.scripted_provider import Reply, assistant, completed, created, output_item_done

PERMISSIONS = {"type": "message", "role": "developer",
               "content": [{"type": "input_text", "text": "<permissions instructions>\nsandboxed\n</permissions instructions>"}]}
AGENTS = {"type": "message", "role": "user",
          "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nrun ruff\n</INSTRUCTIONS>"}]}
ENVIRONMENT = {"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"}]}
CONTEXT = [PERMISSIONS, AGENTS, ENVIRONMENT]


def items_reply(*items: dict[str, Any], input_tokens: int = 100, output_tokens: int = 10,
                headers: dict[str, str] | None = None) -> Reply:
    """A streamed response whose output is `items`, then `response.completed` with the usage."""
    events = [created(), *(output_item_done(item, i) for i, item in enumerate(items)),
              completed(input_tokens=input_tokens, output_tokens=output_tokens)]
    return Reply.sse(events, headers=headers)


def text_reply(text: str = "Done.", **kwargs: Any) -> Reply:
    return items_reply(assistant(text), **kwargs)


def compaction_reply(encrypted_content: str = "ENC", **kwargs: Any) -> Reply:
    """A remote v2 answer: exactly one compaction item."""
    return items_reply({"type": "compaction", "encrypted_content": encrypted_content}, **kwargs)


def rollout(api, session_id: int) -> list[dict[str, Any]]:
    response = api.get(f"/api/v1/sessions/{session_id}/rollout")
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines() if line]


def line_kinds(lines: list[dict[str, Any]]) -> list[str]:
    """`type` of each line, with event_msg lines as `event:<type>` and items as `item:<type>:<role>`."""
    out = []
    for line in lines:
        payload = line["payload"]
        if line["type"] == "response_item":
            out.append(f"item:{payload.get('type')}:{payload.get('role', '')}")
        elif line["type"] == "event_msg":
            out.append(f"event:{payload.get('type')}")
        else:
            out.append(line["type"])
    return out


class ScriptedSessions:
    """Factory of API sessions on one served scripted provider."""

    def __init__(self, api, script) -> None:
        self.api = api
        self.script = script
        self._n = 0

    def provider(self, **fields: Any):
        from compaction_app.models import Provider

        self._n += 1
        fields.setdefault("model", "gpt-test")
        fields.setdefault("context_window", 100_000)
        fields.setdefault("remote_compaction", Provider.RemoteCompaction.V2)
        fields.setdefault("stream_max_retries", 0)
        fields.setdefault("request_max_retries", 0)
        return Provider.objects.create(name=f"scripted-{self._n}", base_url=self.script.base_url, **fields)

    def policy(self, **fields: Any):
        from compaction_app.models import CompactionPolicy

        self._n += 1
        return CompactionPolicy.objects.create(name=f"scripted-policy-{self._n}", **fields)

    def create(self, *, provider=None, policy=None, provider_fields: dict | None = None,
               policy_fields: dict | None = None, **body: Any) -> dict[str, Any]:
        provider = provider or self.provider(**(provider_fields or {}))
        policy = policy or self.policy(**(policy_fields or {}))
        body.setdefault("title", "scripted")
        response = self.api.post("/api/v1/sessions", {"provider": provider.pk, "policy": policy.pk, **body},
                                 format="json")
        assert response.status_code == 201, response.json()
        return response.json()

    def turn(self, session_id: int, payload: Any = "next", *, status: int = 200) -> dict[str, Any]:
        body = payload if isinstance(payload, dict) else {"input": payload}
        response = self.api.post(f"/api/v1/sessions/{session_id}/turns", body, format="json")
        assert response.status_code == status, response.json()
        return response.json()

    def rollout(self, session_id: int) -> list[dict[str, Any]]:
        return rollout(self.api, session_id)

    def history(self, session_id: int) -> list[dict[str, Any]]:
        """The whole live history, page after page (the API answers at most 1,000 items a time)."""
        items, query = [], {"limit": 1000}
        while True:
            body = self.api.get(f"/api/v1/sessions/{session_id}/history", query).json()
            items += body["items"]
            if body["next"] is None:
                return items
            query = {"limit": 1000, "after": body["next"]}
