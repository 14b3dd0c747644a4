"""Seed the browser tests' server database (run in a subprocess before Daphne starts): the embedded provider, a
policy, one user per role (and one without a role) with API tokens, and a session to compact by hand whose
simulated model answers slowly, so its progress is visible. Prints what the tests need as JSON."""

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402

from compaction_app.models import CompactionPolicy, Provider  # noqa: E402
from compactweb.api_tokens import issue_token  # noqa: E402
from sessions_app.management.commands.setup_demo import seed_examples  # noqa: E402
from sessions_app.rollout.services import do_create_session  # noqa: E402

PASSWORD = "browser-test-password"


def user(name: str, role: str | None) -> dict:
    account = User.objects.create_user(username=name, password=PASSWORD, is_staff=role == "admin")
    if role:
        account.groups.add(Group.objects.get(name=role))
    return {"username": name, "password": PASSWORD, "token": issue_token(user=account), "id": account.pk}


def message(role: str, text: str) -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


call_command("migrate", verbosity=0)
provider = Provider.objects.create(
    name="embedded", base_url=Provider.EMBEDDED, model="sim-1", context_window=32000,
    remote_compaction=Provider.RemoteCompaction.V2,
)
policy = CompactionPolicy.objects.create(name="default")
seed_examples()  # the example prompt and disabled hook setup_demo gives admins

turns = []
for n, (ask, answer) in enumerate([
    ("The parser drops the last token of every line; find out why.", "The tokenizer stops one byte early."),
    ("Fix it and add a regression test.", "Fixed the bound and added test_last_token_kept."),
    ("Now run the whole suite and summarise failures.", "All 214 tests pass; two are slow."),
]):
    turns += [message("user", f"{ask} " + "context " * 60 * (n + 1)), message("assistant", answer)]
slow = do_create_session(title="Parser fix (manual compaction)", provider=provider, policy=policy, items=turns,
                         fault_injection={"fault": "slow=2"})
# Turns that take a few seconds (each model request waits 3 s): a manual compaction asked for during one is queued.
busy = do_create_session(title="Queue behind a turn", provider=provider, policy=policy, items=turns[:2],
                         fault_injection={"fault": "slow=3"})
# A history the model's window (2,500 tokens for this session) cannot take: remote compaction fails with
# context_window_exceeded, so the session is stuck until an operator recovers it.
logs = []
for n in range(5):
    logs += [message("user", f"Read log part {n} and say what failed."),
             message("assistant", f"Part {n}: " + "timeout retry backoff worker restart " * 180)]
stuck = do_create_session(title="Stuck over its window", provider=provider, policy=policy, items=logs,
                          fault_injection={"context_window": 2500})
# The same, for the session page's own stuck box and recovery (the fleet test recovers the first one).
stuck_here = do_create_session(title="Stuck on its page", provider=provider, policy=policy, items=logs,
                               fault_injection={"context_window": 2500})
# Another, for the controls' reach at 1280 px (nothing recovers it, so it stays stuck for that test).
stuck_narrow = do_create_session(title="Stuck at 1280 px", provider=provider, policy=policy, items=logs,
                                 fault_injection={"context_window": 2500})
# A slow compaction of its own, so a notice can be seen before the compaction it speaks of ends.
notice = do_create_session(title="Notice ends with its compaction", provider=provider, policy=policy, items=turns,
                           fault_injection={"fault": "slow=2"})
# A fleet bigger than a page of the board (its own server: tests/browser/test_fleet_paging.py).
fleet = [
    do_create_session(title=f"fleet agent {n:03d}", provider=provider, policy=policy).pk
    for n in range(int(os.environ.get("COMPACTWEB_SEED_FLEET") or 0))
]
# The page states an operator meets, for the accessibility checks (their own server:
# tests/browser/test_accessibility_states.py): alerts (session and fleet), a local summary, a stuck session, an
# injected fault blamed for a failure, a running simulated session with run controls.
a11y = {}
if os.environ.get("COMPACTWEB_SEED_A11Y"):
    from django.utils import timezone  # noqa: E402

    from compaction_app.models import Alert, Compaction, CompactionAttempt  # noqa: E402
    from sessions_app.compactions.services import do_compact_session  # noqa: E402
    from sessions_app.fleet.runtime import do_start_fleet  # noqa: E402

    summarised = do_create_session(title="Summarised locally", provider=provider, policy=policy, items=turns)
    local = do_compact_session(session_id=summarised.pk, strategy="local")
    failed = CompactionAttempt.objects.create(
        session=summarised, trigger="auto", reason="context_limit", implementation="responses", phase="pre_turn",
        strategy="local", status="failed", error_kind="server_error", error_http_status=500,
        error_message="fault injected: internal server error", tokens_before=9_000, started_at=timezone.now())
    streak = Alert.objects.create(kind=Alert.Kind.FAILURE_STREAK, session=summarised, count=3,
                                  message="3 compaction attempts of this session failed in a row")
    streak.attempts.add(failed)
    Alert.objects.create(kind=Alert.Kind.FLEET_STORM, message="12 compactions across the fleet in 5 minutes")
    # An alert naming a compaction: its link sits in the message's text (issue 47: told apart by more than colour).
    reread = Alert.objects.create(
        kind=Alert.Kind.REREAD, session=summarised,
        message=f"compact-forget-re-read: 2 call(s) re-fetched what compaction #{local.pk} dropped (src/cent.py), "
                "9,479 tokens of the 34,874 it freed")
    reread.compactions.add(local)
    stuck_seeded = do_create_session(title="Stuck, seeded", provider=provider, policy=policy, items=logs,
                                     fault_injection={"fault": "server_error;times=2;key=a11y", "context_window": 2500})
    CompactionAttempt.objects.create(
        session=stuck_seeded, trigger="auto", reason="context_limit", implementation="responses_compact",
        phase="pre_turn", strategy="remote_v1", status="failed", error_kind="context_window_exceeded",
        tokens_before=40_000, started_at=timezone.now())
    # Two runs: one a test stops (a refused run control), one that keeps its Pause on the board.
    run, kept_running = do_start_fleet(scenario="many-short-turns", count=2, provider=provider, policy=policy,
                            turns_per_minute=2, loop=True)
    # Issue 47: a long history compacted (the inspector's height at 1280 px), a Claude Code transcript imported, a
    # session recorded by the gateway (the session kinds the pages must not show as simulated), a second run
    # (its session page's skip link to Pause).
    from gateway_app.keys import do_create_gateway_key  # noqa: E402
    from gateway_app.models import GatewayRoute, GatewaySession  # noqa: E402
    from gateway_app.recording import GATEWAY_SOURCE, ORIGINATOR  # noqa: E402
    from sessions_app.rollout.services import ClientOrigin  # noqa: E402
    from sessions_app.transfer.importer import do_import_rollout  # noqa: E402
    from tests.sessions_app.claude_transcript.transcripts import conversation_with_two_compactions  # noqa: E402

    work = []
    for n in range(60):
        work += [message("user", f"Step {n}: run the billing tests and fix what fails in src/ledger_{n}.py"),
                 {"type": "function_call", "call_id": f"c{n}", "name": "shell",
                  "arguments": json.dumps({"command": ["bash", "-lc", f"pytest -q tests/test_{n}.py"]})},
                 {"type": "function_call_output", "call_id": f"c{n}",
                  "output": f"Exit code: {n % 2}\nOutput:\n" + "FAILED test_split AssertionError\n" * 6},
                 message("assistant", f"Fixed the rounding in src/ledger_{n}.py; " + "checked " * 20)]
    long_session = do_create_session(title="A long history", provider=provider, policy=policy, items=work)
    long_compaction = do_compact_session(session_id=long_session.pk, strategy="local")
    claude = do_import_rollout(lines=conversation_with_two_compactions().bytes().splitlines(keepends=True),
                               source_name="claude.jsonl").session
    route = GatewayRoute.objects.create(name="team-sim", provider=provider, policy=policy)
    key = do_create_gateway_key(route=route, client_name="alice-laptop")
    recorded = do_create_session(title="alice-laptop via team-sim: fix the parser", provider=provider, policy=policy,
                                 items=turns, origin=ClientOrigin(source=GATEWAY_SOURCE, originator=ORIGINATOR,
                                                                  model_provider="team-sim"))
    GatewaySession.objects.create(session=recorded, route=route, key=key.row, client_name="alice-laptop",
                                  group_key=f"thread:{recorded.thread_id}")
    # A gateway session recorded by its history alone (its client sends no session id): the card's note says it
    # cannot be steered. And a Claude Code route taking users' keys: the keys page's Claude Code set-up (named after
    # team-sim, so a test that lets team-sim take user keys finds its Codex set-up first and open).
    unsteerable = do_create_session(title="bob-desktop via team-sim: no session id", provider=provider,
                                    policy=policy, items=turns,
                                    origin=ClientOrigin(source=GATEWAY_SOURCE, originator=ORIGINATOR,
                                                        model_provider="team-sim"))
    GatewaySession.objects.create(session=unsteerable, route=route, key=key.row, client_name="bob-desktop",
                                  group_key="prefix:" + "0" * 64)
    claude_model = Provider.objects.create(name="embedded-claude", base_url=Provider.EMBEDDED, model="claude-sim",
                                           context_window=32000, wire_api=Provider.WireApi.ANTHROPIC)
    GatewayRoute.objects.create(name="team-sim-claude", provider=claude_model, policy=policy, allow_user_keys=True)
    a11y = {"summarised_session": summarised.pk, "local_compaction": local.pk, "stuck_seeded": stuck_seeded.pk,
            "run_session": run.session_id, "kept_running": kept_running.session_id,
            "long_compaction": long_compaction.pk, "claude_session": claude.pk, "route": route.pk,
            "claude_compaction": Compaction.objects.filter(session=claude).order_by("rollout_seq").first().pk,
            "gateway_session": recorded.pk, "unsteerable_gateway_session": unsteerable.pk, "key": key.row.pk, "group": Group.objects.get(name="operator").pk}
# A gateway route on the embedded model whose key the tests send Codex's requests with, and a Claude Code route, both
# taking users' own keys (their own server: tests/browser/test_gateway_card_seen.py): the gateway card seen as the
# requests arrive, and the set-up the keys page gives.
gateway = {}
if os.environ.get("COMPACTWEB_SEED_GATEWAY"):
    from gateway_app.keys import do_create_gateway_key  # noqa: E402
    from gateway_app.models import GatewayRoute  # noqa: E402

    gateway_route = GatewayRoute.objects.create(name="team", provider=provider, policy=policy,
                                                compaction_mode="compactweb", allow_user_keys=True)
    # and one for Claude Code: the embedded model speaking Anthropic's Messages API
    messages = Provider.objects.create(name="embedded-messages", base_url=Provider.EMBEDDED, model="claude-sim",
                                       context_window=32000, wire_api=Provider.WireApi.ANTHROPIC)
    GatewayRoute.objects.create(name="claude", provider=messages, policy=policy, allow_user_keys=True)
    gateway = {"route": gateway_route.name,
               "key": do_create_gateway_key(route=gateway_route, client_name="alice-laptop").key}
print(json.dumps({
    "a11y": a11y,
    "gateway": gateway,
    "fleet": fleet,
    "provider": provider.pk,
    "policy": policy.pk,
    "slow_session": slow.pk,
    "busy_session": busy.pk,
    "stuck_session": stuck.pk,
    "stuck_here_session": stuck_here.pk,
    "stuck_narrow_session": stuck_narrow.pk,
    "notice_session": notice.pk,
    "users": {role or "none": user(role or "norole", role) for role in ("operator", "support", "admin", None)},
}))
