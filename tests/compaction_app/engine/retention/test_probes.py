"""probes.py: the model-judged check's questions and how an answer is read (issue 43: each rule with its
boundaries, against a fake client that answers what it is told, no provider and no database)."""

from __future__ import annotations

import asyncio

import pytest

from compaction_app.engine.items import user_message
from compaction_app.engine.port import StreamEvent, Usage
from compaction_app.engine.retention.facts import Category, FactKind, ProbeFact
from compaction_app.engine.retention.probes import (
    POINTED_INTRO,
    QUESTIONS,
    ask,
    model_judged_check,
    pointed,
    pointed_question,
    probe_category,
    probe_questions,
    probe_request,
    probe_text,
)

SETTING = ProbeFact.of(FactKind.VALUE, "listen_port = 19000 (in conf/app.toml)", "Which settings?",
                       subject="conf/app.toml", setting="listen_port", value="19000")
FAILED = ProbeFact.of(FactKind.COMMAND, "exit 1 of make deploy", "Which commands?", status=1, subject="make deploy")
GOAL = ProbeFact.of(FactKind.GOAL, "fix the rounding in src/billing/split.py", "What did the user ask for?")


def test_a_setting_is_asked_for_its_latest_value_and_a_command_for_its_exit_code():
    assert pointed_question(SETTING) == "What is the latest value of listen_port (in conf/app.toml)?"
    assert pointed_question(FAILED) == "How did `make deploy` exit? Give its exit code."


def test_a_fact_with_no_setting_or_no_command_line_gets_no_pointed_question():
    assert pointed_question(GOAL) is None
    assert pointed_question(ProbeFact.of(FactKind.COMMAND, "exit 0", "q", status=0)) is None  # no subject
    assert pointed_question(ProbeFact.of(FactKind.COMMAND, "make", "q", subject="make")) is None  # no status


def test_a_categorys_questions_are_numbered_from_one_in_fact_order_and_only_its_own():
    questions = pointed([GOAL, SETTING, FAILED], Category.ARTIFACT_TRAIL)
    assert [(n, fact) for n, fact, _ in questions] == [(1, SETTING), (2, FAILED)]
    assert pointed([GOAL, SETTING, FAILED], Category.RECALL) == []  # a goal has no pointed question


def test_a_probe_is_its_categorys_question_then_its_numbered_questions_which_read_back():
    questions = pointed([SETTING, FAILED], Category.ARTIFACT_TRAIL)
    text = probe_text(Category.ARTIFACT_TRAIL, questions)
    assert text.startswith(f'<retention_probe category="artifact_trail">{QUESTIONS[Category.ARTIFACT_TRAIL]}\n'
                           f"{POINTED_INTRO}\nQ1. ")
    assert text.endswith("</retention_probe>")
    assert probe_questions(text) == [(n, q) for n, _, q in questions]
    assert probe_category(text) is Category.ARTIFACT_TRAIL


def test_a_probe_without_numbered_questions_has_no_intro_for_them():
    assert probe_text(Category.DECISION) == (f'<retention_probe category="decision">{QUESTIONS[Category.DECISION]}'
                                             "</retention_probe>")
    assert probe_questions(probe_text(Category.DECISION)) == []


@pytest.mark.parametrize("text", ['<retention_probe category="nope">x', 'hello <retention_probe category="recall">',
                                  "<retention_probe>", "plain text"])
def test_a_text_that_is_no_probe_of_a_known_category_has_none(text):
    assert probe_category(text) is None


def test_a_probe_opening_after_whitespace_is_still_a_probe():
    assert probe_category('  <retention_probe category="recall">x') is Category.RECALL


def test_a_probe_request_is_the_window_then_the_question_with_no_tools():
    window = [user_message("fix it")]
    request = probe_request(model="m", history=window, category=Category.RECALL, instructions="be brief")
    assert (request.model, request.instructions, request.tools) == ("m", "be brief", [])
    assert len(request.input) == 2
    assert request.input[-1]["content"][0]["text"] == probe_text(Category.RECALL)


def _message(*texts: str, part: str = "output_text") -> StreamEvent:
    return StreamEvent(type="response.output_item.done", item={
        "type": "message", "role": "assistant", "content": [{"type": part, "text": t} for t in texts]})


class Answering:
    """A client that answers each probe with the lines given for its category, and spends 10 tokens a request."""

    model = "fake"

    def __init__(self, answers: dict[Category, list[str]]) -> None:
        self.answers = answers
        self.asked: list[Category] = []
        self.models: list[str] = []

    async def stream_response(self, request):
        category = probe_category(request.input[-1]["content"][0]["text"])
        self.asked.append(category)
        self.models.append(request.model)
        yield StreamEvent(type="response.created")
        yield _message(*self.answers.get(category, []))
        yield StreamEvent(type="response.completed", usage=Usage(total_tokens=10))


def test_an_answer_is_the_text_of_its_message_parts_and_the_tokens_its_request_spent():
    class Client:
        async def stream_response(self, request):
            yield _message("a", "b")
            yield _message("c", part="text")
            yield _message("not read", part="refusal")
            yield StreamEvent(type="response.output_item.done", item={"type": "reasoning", "summary": []})
            yield StreamEvent(type="response.completed", usage=Usage(total_tokens=42))

    assert asyncio.run(ask(Client(), probe_request(model="m", history=[], category=Category.RECALL))) == \
        ("a\nb\nc", 42)


def test_an_answer_without_usage_spent_nothing():
    class Client:
        async def stream_response(self, request):
            yield _message("a")
            yield StreamEvent(type="response.completed")

    assert asyncio.run(ask(Client(), probe_request(model="m", history=[], category=Category.RECALL))) == ("a", 0)


def test_the_check_asks_once_per_category_with_facts_and_judges_each_fact_on_its_answer():
    client = Answering({Category.RECALL: ["fix the rounding in src/billing/split.py"],
                        Category.ARTIFACT_TRAIL: ["A1. 19000", "A2. I do not know"]})
    score = asyncio.run(model_judged_check(facts=[GOAL, SETTING, FAILED], after=[], client=client, model="m"))
    assert client.asked == [Category.RECALL, Category.ARTIFACT_TRAIL]  # no continuation or decision facts
    assert client.models == ["m", "m"]  # each probe asks the model given
    assert {v.fact.key: v.kept for v in score.verdicts} == {GOAL.key: True, SETTING.key: True, FAILED.key: False}
    assert score.tokens_spent == 20
    assert set(score.answers) == {"recall", "artifact_trail"}
