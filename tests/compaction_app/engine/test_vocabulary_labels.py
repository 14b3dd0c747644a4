"""One set of words for a compaction method (h17): the vocabulary's labels, whichever value names the method."""

from django.template import Context, Template

from compaction_app.choices import text_choices
from compaction_app.engine.vocabulary import IMPLEMENTATIONS, LABELS, Implementation, Strategy, method_label


def test_an_implementation_reads_as_the_method_it_implements():
    for strategy, implementation in IMPLEMENTATIONS.items():
        assert method_label(implementation.value) == method_label(strategy.value) == LABELS[Strategy][strategy.value]
    assert method_label("responses") == "local summarisation"
    assert method_label("no_such_method") is None


def test_pages_admin_and_forms_use_the_same_words():
    page = Template("{% load live_ui %}{{ a|method }}|{{ b|method }}|{{ c|method }}").render(
        Context({"a": "responses_compaction_v2", "b": "token_budget", "c": "some_other_value"}))
    assert page == "remote compaction v2|new window (token budget)|some other value"
    admin_choices = dict(text_choices(Implementation).choices)
    assert admin_choices["responses"] == "local summarisation"
    assert admin_choices["observation_masking"] == method_label("masking")
