"""Claims that use a fact's own words to say the opposite: the structural check must not count them as kept.

A summary keeps a fact when it holds its identifiers and enough of its words (`match.states`). Three kinds of
claim hold both and still say the opposite, and each has a shape that tells it:

- **a preference turned round**: the user chose A instead of B, the summary says B over A ("Celery for the export
  queue, not Redis streams"). A choice is read from its markers (`instead of`, `rather than`, `in place of`,
  `, not`, `chose ... over`, `in favour of`) as the words on the chosen side and the words on the rejected side;
- **a prohibition without its negation**: the user said "don't run migrations against prod-20", the summary says
  "migrations go to prod-20 now". A constraint that restricts (a negative, asking that something stay as it is,
  "must", "only", "has to") is only kept by a claim that restricts too ("npm install is fine" for "use pnpm
  only" is not);
- **a step still to do, claimed done**: "TODO: backfill invoice_lines for tenant t21" against "Already done:
  backfilled invoice_lines for tenant t21". A pending step is not kept by a claim that reports it finished
  (done words, or the step's own verb in the past tense) and does not say it is still open.

Plain Python; the same texts always give the same verdict.
"""

from __future__ import annotations

import re
from functools import lru_cache

from compaction_app.engine.retention.match import STOP_WORDS, stem

_WORD = re.compile(r"[a-z][a-z0-9_'-]*")
# Where a clause ends: a choice's sides do not run past it.
_CLAUSE = re.compile(r"[.;:!?()\[\]|\n]|\s[-–]\s|,(?!\s*not\b)")
# (marker, which side is chosen: "before" the marker or "after" it)
_CHOICE = re.compile(
    r"\b(?P<before>instead of|rather than|in place of|over|,? not)\b|\b(?P<after>in favou?r of)\b")
# "over" marks a choice only after a verb of choosing ("chose Celery over Redis"), not "over HTTP".
_CHOOSING = re.compile(r"\b(?:chose|choose|chosen|choosing|prefer|prefers|preferred|pick|picked|picks|select|"
                       r"selected|favou?r|favou?red|go with|went with|going with)\b")
# A negative word, not a part of a hyphenated name (`--no-verify` is a flag, not a "no").
NEGATION = re.compile(r"(?<![\w-])(?:not|no|never|none|nothing|without|avoid|nor|cannot|can't|don't|doesn't|"
                      r"didn't|won't|mustn't|shouldn't|isn't|aren't|wasn't|forbidden|prohibited)(?![\w-])|n't\b")
# What asks for something to stay as it is: a prohibition of change without a negative word.
PRESERVE = re.compile(r"\b(?:keep|leave)\b.*\b(?:as (?:it is|they are|is)|unchanged|intact|stable|alone)\b|"
                      r"\b(?:frozen|unchanged|intact|untouched)\b")
DONE = re.compile(r"\b(?:done|completed?|finished|already|resolved|closed|fixed|merged|shipped)\b")
PENDING = re.compile(r"\b(?:todo|to do|to be|still|open|pending|next|remains?|remaining|must|needs?|should|"
                     r"not yet|yet to|outstanding|planned|will)\b")
CHECKED = re.compile(r"\[x\]|☑|✅|✔")
_IRREGULAR = {"run": "ran", "rerun": "reran", "write": "wrote", "rewrite": "rewrote", "make": "made", "do": "did",
              "redo": "redid", "build": "built", "rebuild": "rebuilt", "send": "sent", "find": "found",
              "take": "took", "give": "gave", "get": "got", "go": "went", "buy": "bought", "undo": "undid"}


def _content(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(text) if w not in STOP_WORDS and len(w) > 1)


@lru_cache(maxsize=8192)
def choice(text: str) -> tuple[frozenset[str], frozenset[str]] | None:
    """The words of the chosen side and of the rejected side of the first choice a text states, else None."""
    lowered = text.lower()
    for match in _CHOICE.finditer(lowered):
        start = max((m.end() for m in _CLAUSE.finditer(lowered, 0, match.start())), default=0)
        stop = _CLAUSE.search(lowered, match.end())
        left, right = lowered[start:match.start()], lowered[match.end():stop.start() if stop else len(lowered)]
        if match.group("before") == "over" and not _CHOOSING.search(left):
            continue
        chosen, rejected = (left, right) if match.group("before") else (right, left)
        chosen_words, rejected_words = _content(chosen), _content(rejected)
        if chosen_words and rejected_words:
            return chosen_words, rejected_words
    return None


def turns_choice_round(fact_text: str, claim: str) -> bool:
    """Whether a claim states the fact's choice the other way round: what the fact rejected on the claim's chosen
    side and what it chose on the claim's rejected side."""
    theirs = choice(fact_text)
    if theirs is None:
        return False
    ours = choice(claim)
    if ours is None:
        return False
    chosen, rejected = theirs[0] - theirs[1], theirs[1] - theirs[0]
    return bool(chosen & ours[1]) and bool(rejected & ours[0])


@lru_cache(maxsize=8192)
def prohibits(text: str) -> bool:
    """Whether a text restricts something: a negative word, asking that something stay as it is, a modal of
    obligation or exclusivity ("must finish before 06:00", "use pnpm only"), or a bound on a value ("max 1200 EUR
    per month", "< €1,200/month": a limit written as a label and its value)."""
    lowered = text.lower().replace("’", "'")
    return any(p.search(lowered) is not None for p in (NEGATION, PRESERVE, OBLIGATION, BOUND))


OBLIGATION = re.compile(r"\b(?:must|only|has to|have to|had to|required|requires?|always|exclusively|at most|"
                        r"at least|no later than|mandatory|deadline|due|"
                        # The same in the languages summaries were met in (Spanish, French, German, Italian,
                        # Portuguese): a restriction is said in the summary's language, not in the user's.
                        r"debe|deben|tiene que|solo|sólo|siempre|nunca|doit|doivent|seulement|uniquement|toujours|"
                        r"jamais|muss|müssen|nur|immer|nie|niemals|deve|devono|sempre|mai|somente|apenas|"
                        r"plazo|fecha límite|échéance|date limite|frist|spätestens|scadenza|prazo)\b")


BOUND = re.compile(r"(?:\b(?:max|maximum|min|minimum|at most|at least|below|under|up to|no more than|"
                   r"limit|cap|"
                   r"máximo|mínimo|como máximo|por debajo del?|menos de|hasta|límite|au plus|au maximum|maximal|"
                   r"en dessous de|moins de|sous|höchstens|maximal|mindestens|unter|weniger als|bis zu|grenze|"
                   r"al massimo|sotto|no máximo|abaixo de)\b|[<>≤≥]=?)\s*[€$£]?\s*\d|"
                   # A range bounds a value both ways: "06:00–09:30", "from 6:00 to 9:30", "between 2 and 5".
                   r"\d\s*[–—]\s*\d|\b(?:from|between)\s+[^\s,;]*\d[^\s,;]*\s+(?:and|to|until)\s+\d")


def drops_negation(fact_text: str, claim: str) -> bool:
    """Whether a claim states a prohibition without any negative ("migrations go to prod-20" for "don't run
    migrations against prod-20"; "renaming the fields is fine" for "keep the field names as they are")."""
    return prohibits(fact_text) and not prohibits(claim)


def _past(verb: str) -> set[str]:
    if verb in _IRREGULAR:
        return {_IRREGULAR[verb]}
    if verb.endswith("e"):
        return {verb + "d"}
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return {verb[:-1] + "ied"}
    return {verb + "ed", verb + verb[-1] + "ed"}


def claims_done(step_text: str, claim: str) -> bool:
    """Whether a claim reports a pending step finished: done words or the step's first verb in the past tense, and
    nothing that says it is still to do."""
    lowered = claim.lower()
    if CHECKED.search(lowered):  # a checked box says done whatever its label ("todo: [x] ...")
        return True
    if PENDING.search(lowered):
        return False
    if DONE.search(lowered):
        return True
    words = _WORD.findall(step_text.lower())
    if not words:
        return False
    return bool(_past(words[0]) & set(_WORD.findall(lowered)))
