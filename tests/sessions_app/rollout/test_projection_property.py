"""The cached live history always equals a rebuild from the rollout, for random histories (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction_app.engine.items import SUMMARY_PREFIX
from sessions_app.models import LiveItem, RolloutLine
from sessions_app.rollout import projection as p
from sessions_app.rollout import selectors
from sessions_app.rollout.services import (
    append_rollout_line,
    do_append_items,
    do_record_usage,
    project_rollout,
    verify_projection,
)

# NUL is refused by item validation (PostgreSQL's jsonb cannot store it), so generated texts leave it out.
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="\x00"), max_size=40)


def _user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


ITEM = st.one_of(
    TEXT.map(_user),
    TEXT.map(lambda t: {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]}),
    TEXT.map(lambda t: {"type": "function_call", "call_id": "c", "name": "shell", "arguments": t}),
    TEXT.map(lambda t: {"type": "function_call_output", "call_id": "c", "output": t}),
    TEXT.map(lambda t: {"type": "reasoning", "summary": [{"type": "summary_text", "text": t}], "encrypted_content": t}),
)

STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(ITEM, min_size=1, max_size=4)),
    st.tuples(st.just("compact"), st.lists(st.integers(0, 30), max_size=4), TEXT),
    st.tuples(st.just("usage"), st.integers(0, 50_000), st.booleans()),
    st.tuples(st.just("turn_context"), TEXT),
    st.tuples(st.just("rollback"), st.integers(0, 10)),
)


def _apply(session, step, installed_histories):
    kind = step[0]
    if kind == "append":
        do_append_items(session=session, items=step[1])
    elif kind == "compact":
        current = selectors.live_items(session=session)
        kept = [current[i] for i in step[1] if i < len(current)]
        history = [*kept, _user(f"{SUMMARY_PREFIX}\n{step[2]}")]
        installed_histories.append(selectors.live_items(session=session))
        append_rollout_line(session=session, kind=p.COMPACTED, payload={"message": "", "replacement_history": history})
    elif kind == "usage":
        do_record_usage(session=session, usage={"input_tokens": step[1], "total_tokens": step[1]}, reasoning_included=step[2])
    elif kind == "turn_context":
        append_rollout_line(session=session, kind=p.TURN_CONTEXT, payload={"turn_id": step[1], "model": "sim-1"})
    elif kind == "rollback" and installed_histories:
        before = installed_histories[step[1] % len(installed_histories)]
        append_rollout_line(session=session, kind=p.ROLLBACK, payload={"replacement_history": before})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(initial=st.lists(ITEM, max_size=4), steps=st.lists(STEP, min_size=1, max_size=10))
def test_cached_projection_equals_rebuild_after_every_step(make_session, initial, steps):
    session = make_session(items=initial)
    installed: list = []
    seen = RolloutLine.objects.filter(session=session).count()
    assert verify_projection(session=session) == []
    for step in steps:
        before_lines = list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", "payload"))
        _apply(session, step, installed)
        assert verify_projection(session=session) == []
        rebuilt = project_rollout(session=session)
        assert selectors.live_items(session=session) == rebuilt.items
        assert session.tokens_in_window == session.__class__.objects.get(pk=session.pk).tokens_in_window
        # the rollout only grows and earlier lines never change
        after_lines = list(RolloutLine.objects.filter(session=session).order_by("seq").values_list("seq", "payload"))
        assert after_lines[: len(before_lines)] == before_lines
        assert len(after_lines) >= seen
        seen = len(after_lines)
    assert LiveItem.objects.filter(session=session).count() == session.live_item_count
