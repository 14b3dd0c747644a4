"""The model-judged retention check: ask probe questions against the post-compaction history and judge the answers.

One probe per category that has facts (Factory asks recall, artifact, continuation and decision probes the same
way): the request carries the new window as its input plus one user message holding the question, wrapped in
`<retention_probe category="...">` so the simulated model can recognise it and answer extractively from what it can
see (including what its own compaction items remember). A real provider answers for real. Answers are judged
deterministically: a fact is kept when its evidence appears in the answer (`score.judge_answers`). The tokens the
probes spent (server usage) are recorded with the score.
"""

from __future__ import annotations

import re

from compaction_app.engine.history import normalize_for_request
from compaction_app.engine.items import Item, user_message
from compaction_app.engine.port import ModelClient, ResponsesRequest
from compaction_app.engine.retention.facts import Category, ProbeFact
from compaction_app.engine.retention.score import RetentionScore, judge_answers

PROBE_OPEN = "<retention_probe"
PROBE_CLOSE = "</retention_probe>"
PROBE_PATTERN = re.compile(r'^\s*<retention_probe category="([a-z_]+)">', re.IGNORECASE)

QUESTIONS = {
    Category.RECALL: "List every goal and constraint the user has given in this conversation, one per line, "
                     "quoting their words.",
    Category.ARTIFACT_TRAIL: "List every file you have read or changed and every command you ran with its exit code "
                             "(`command` exit N), one per line, and every error you saw.",
    Category.CONTINUATION: "What are you working on right now, and what are the next steps? One per line.",
    Category.DECISION: "Which decisions or conclusions have you reached so far? One per line.",
}


POINTED_INTRO = ("Then answer each numbered question on a line of its own that starts with its number as `A<n>.`; "
                 "answer `I do not know` when the conversation does not tell you.")
POINTED_LINE = re.compile(r"^Q(\d+)\. (.*)$", re.MULTILINE)


def pointed_question(fact: ProbeFact) -> str | None:
    """A question about one fact that does not state its answer: a command's exit status, a setting's value."""
    if fact.setting:
        name = fact.text.split(" = ", 1)[0]
        return f"What is the latest value of {name} (in {fact.subject})?"
    if fact.status is not None and fact.subject:
        return f"How did `{fact.subject}` exit? Give its exit code."
    return None


def pointed(facts: list[ProbeFact], category: Category) -> list[tuple[int, ProbeFact, str]]:
    """The numbered questions of a category's probe: (number, fact, question), numbered from 1 in fact order."""
    found = []
    for fact in facts:
        question = pointed_question(fact) if fact.category is category else None
        if question is not None:
            found.append((len(found) + 1, fact, question))
    return found


def probe_text(category: Category, questions: list[tuple[int, ProbeFact, str]] | None = None) -> str:
    numbered = "".join(f"\nQ{n}. {q}" for n, _, q in questions or ())
    intro = f"\n{POINTED_INTRO}" if numbered else ""
    return f'{PROBE_OPEN} category="{category.value}">{QUESTIONS[category]}{intro}{numbered}{PROBE_CLOSE}'


def probe_questions(text: str) -> list[tuple[int, str]]:
    """The numbered questions of a probe message: (number, question)."""
    return [(int(n), q.removesuffix(PROBE_CLOSE).strip()) for n, q in POINTED_LINE.findall(text)]


def probe_category(text: str) -> Category | None:
    """The category a probe message asks about, or None when the text is not a probe."""
    match = PROBE_PATTERN.match(text)
    if not match:
        return None
    try:
        return Category(match.group(1))
    except ValueError:
        return None


def probe_request(*, model: str, history: list[Item], category: Category, instructions: str = "",
                  questions: list[tuple[int, ProbeFact, str]] | None = None) -> ResponsesRequest:
    """A streamed request with no tools: the window as the model would see it, then the probe question."""
    return ResponsesRequest(
        model=model,
        input=normalize_for_request([*history, user_message(probe_text(category, questions))]),
        instructions=instructions,
        tools=[],
    )


async def ask(client: ModelClient, request: ResponsesRequest) -> tuple[str, int]:
    """The answer's text and the tokens the request spent."""
    texts: list[str] = []
    spent = 0
    async for event in client.stream_response(request):
        if event.type == "response.output_item.done" and event.item and event.item.get("type") == "message":
            for part in event.item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "text"):
                    texts.append(part.get("text", ""))
        elif event.type == "response.completed" and event.usage is not None:
            spent = event.usage.total_tokens
    return "\n".join(texts), spent


async def model_judged_check(
    *, facts: list[ProbeFact], after: list[Item], client: ModelClient, model: str, instructions: str = "",
) -> RetentionScore:
    """Ask one probe per category that has facts (with a numbered question per pointed fact); judge every fact
    against the answer about it."""
    answers: dict[str, str] = {}
    numbered: dict[str, int] = {}
    spent = 0
    for category in Category:
        if not any(f.category is category for f in facts):
            continue
        questions = pointed(facts, category)
        numbered |= {fact.key: n for n, fact, _ in questions}
        text, tokens = await ask(client, probe_request(model=model, history=after, category=category,
                                                      instructions=instructions, questions=questions))
        answers[category.value] = text
        spent += tokens
    return judge_answers(facts, answers, tokens_spent=spent, numbered=numbered)
