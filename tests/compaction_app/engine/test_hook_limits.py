"""Issue 14: hooks run only from allowed modules, never longer than the cap, and a webhook's answer is read only up
to a size cap; a hook refused for any of these is a failed run that does not stop the compaction (spec §7)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from compaction_app.engine.hooks import HookEvent, HookRunner, HookSpec, HookStatus, callable_allowed

CALLED: list[dict] = []
REQUEST = {"trigger": "manual", "session_id": "s"}


def recording_hook(request):
    CALLED.append(request)


async def sleepy_hook(request):
    await asyncio.sleep(30)


def _run(runner: HookRunner):
    return asyncio.run(runner.run(HookEvent.PRE_COMPACT, REQUEST, lambda event: None)).records


def _spec(target: str, *, kind: str = "callable", timeout: float = 10.0) -> HookSpec:
    return HookSpec(name="h", event="pre_compact", kind=kind, target=target, timeout=timeout)


def test_a_callable_outside_the_allowed_modules_is_never_imported_or_called():
    resolved = []
    runner = HookRunner([_spec("os.system")], callable_prefixes=("compactweb_hooks.",),
                        resolver=lambda path: resolved.append(path) or recording_hook)
    (record,) = _run(runner)
    assert record.status is HookStatus.FAILED and "outside the allowed hook modules" in record.error
    assert resolved == []


def test_a_callable_under_an_allowed_prefix_runs():
    CALLED.clear()
    runner = HookRunner([_spec(f"{__name__}.recording_hook")], callable_prefixes=("tests.",))
    (record,) = _run(runner)
    assert record.status is HookStatus.COMPLETED and CALLED == [REQUEST]


def test_prefixes_match_from_the_start_only():
    assert callable_allowed("compactweb_hooks.notify", ("compactweb_hooks.",))
    assert not callable_allowed("evil.compactweb_hooks.notify", ("compactweb_hooks.",))
    assert not callable_allowed("compactweb_hooks_evil.x", ("compactweb_hooks.",))
    assert not callable_allowed("anything.at.all", ())
    assert callable_allowed("anything.at.all", None)


def test_a_hook_timeout_above_the_cap_is_cut_to_the_cap():
    runner = HookRunner([_spec(f"{__name__}.sleepy_hook", timeout=3600)], callable_prefixes=("tests.",),
                        max_timeout=0.05)
    (record,) = _run(runner)
    assert record.status is HookStatus.FAILED and record.error == "timed out"


def test_a_webhook_answer_over_the_size_cap_fails_the_hook_and_is_not_kept():
    big = b'{"continue": false, "stopReason": "' + b"x" * 10_000 + b'"}'
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=big))
    runner = HookRunner([_spec("https://hooks.example.invalid/pre", kind="webhook")], transport=transport,
                        max_response_bytes=1_000)
    (record,) = _run(runner)
    assert record.status is HookStatus.FAILED and "larger than 1000 bytes" in record.error
    assert record.output is None and record.stop_reason is None


def test_a_webhook_answer_under_the_cap_is_used():
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"continue": False, "stopReason": "no"}))
    runner = HookRunner([_spec("https://hooks.example.invalid/pre", kind="webhook")], transport=transport)
    (record,) = _run(runner)
    assert record.status is HookStatus.STOPPED and record.stop_reason == "no"


@pytest.mark.parametrize("status", [301, 302])
def test_a_webhook_redirect_is_not_followed(status):
    seen = []

    def answer(request):
        seen.append(str(request.url))
        return httpx.Response(status, headers={"Location": "http://169.254.169.254/latest/meta-data/"})

    runner = HookRunner([_spec("https://hooks.example.invalid/pre", kind="webhook")],
                        transport=httpx.MockTransport(answer))
    (record,) = _run(runner)
    assert seen == ["https://hooks.example.invalid/pre"]
    assert record.status is HookStatus.COMPLETED  # a 3xx is not an error, and its target is never called
