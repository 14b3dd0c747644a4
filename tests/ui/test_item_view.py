"""How history items render by kind (sessions_app.templatetags.live_ui)."""

import json

from django.template import Context, Template

from compaction_app.engine.items import SUMMARY_PREFIX, user_message
from sessions_app.templatetags.live_ui import COLLAPSE_CHARS, item_view, meter_view


def test_a_summary_message_is_marked_as_a_summary_without_its_prefix():
    view = item_view(user_message(SUMMARY_PREFIX + "\nwe fixed the parser"))
    assert (view.kind, view.label, view.text) == ("summary", "Summary", "we fixed the parser")


def test_injected_context_is_folded_and_labelled():
    view = item_view(user_message("<environment_context>\n  <cwd>/src</cwd>\n</environment_context>"))
    assert view.kind == "context" and view.collapse


def test_a_long_tool_output_collapses_and_a_short_one_does_not():
    long = item_view({"type": "function_call_output", "call_id": "c1", "output": "x" * (COLLAPSE_CHARS + 1)})
    short = item_view({"type": "function_call_output", "call_id": "c1", "output": "ok"})
    assert long.kind == "output" and long.collapse and long.preview.endswith("…")
    assert not short.collapse and short.meta == "c1"


def test_a_tool_call_shows_its_name_and_pretty_arguments():
    view = item_view({"type": "function_call", "name": "shell", "call_id": "c9",
                      "arguments": json.dumps({"command": ["ls"]})})
    assert view.kind == "call" and view.meta == "shell · c9" and '"command"' in view.text


def test_a_compaction_item_is_opaque():
    view = item_view({"type": "compaction_summary", "encrypted_content": "abcd"})
    assert view.kind == "compaction" and "4 bytes" in view.meta and "abcd" not in view.text


def test_reasoning_shows_its_readable_summary():
    view = item_view({"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}],
                      "encrypted_content": "zz"})
    assert (view.kind, view.text, view.meta) == ("reasoning", "think", "encrypted")


def test_the_template_escapes_item_text():
    html = Template('{% load live_ui %}{% with v=item|item_view %}{{ v.text }}{% endwith %}').render(
        Context({"item": user_message("<b>bold</b>")})
    )
    assert html == "&lt;b&gt;bold&lt;/b&gt;"


def test_the_meter_colours_by_headroom_before_the_limit():
    def level(tokens):
        return meter_view({"tokens_in_window": tokens, "context_window": 1000, "auto_compact_limit": 900}).level

    assert [level(100), level(600), level(800), level(950)] == ["ok", "warm", "hot", "over"]
    view = meter_view({"tokens_in_window": 450, "context_window": 1000, "auto_compact_limit": 900})
    assert (view.pct, view.limit_pct, view.headroom) == (45.0, 90.0, 450)


def test_ages_read_as_words():
    from datetime import timedelta

    from django.utils import timezone

    from sessions_app.templatetags.live_ui import age_words, ago

    now = timezone.now()
    assert [age_words(s) for s in (5, 300, 7200, 200000)] == ["just now", "5 min ago", "2 h ago", "2 d ago"]
    # in a <time> element with its age in seconds, which live.js moves on while the page stays open
    assert ago(now - timedelta(seconds=300)).startswith('<time datetime="') and 'data-age="300">5 min ago</time>' \
        in ago(now - timedelta(seconds=300))
