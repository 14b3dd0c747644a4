"""Fault injection per session, switched by an operator (design: "fault injection an operator can switch on per
session"). The simulated model reads the session's `fault_injection` as request headers on every request of its
turns and compactions (sessions_app.compactions.settings_builder.fault_headers)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction

from compaction_app.audit import record_audit
from compaction_app.engine.vocabulary import IMPLEMENTATIONS, Strategy
from compaction_app.models import AuditEntry
from compaction_app.providers.factory import embedded_fault_use
from compaction_app.providers.simulated import faults as sim_faults
from compactweb import background
from sessions_app.compactions.settings_builder import (
    FaultInjectionError,
    fault_headers,
    request_max_retries,
    stream_max_retries,
)
from sessions_app.models import Session, SimulatorRun
from sessions_app.rollout.lease import READ_ONLY_SOURCES


def do_set_session_faults(*, session_id: int, fault: str, actor) -> Session:
    """Set (or, with `fault=""`, clear) the session's simulated-model fault, keeping its other fault settings.
    A malformed fault raises FaultInjectionError and changes nothing; every change is in the audit log."""
    with transaction.atomic():
        session = Session.objects.select_for_update().get(pk=session_id)
        injection = {k: v for k, v in (session.fault_injection or {}).items() if k != "fault"}
        if fault:
            injection["fault"] = fault
        fault_headers(injection)  # raises FaultInjectionError for a malformed value
        before = (session.fault_injection or {}).get("fault", "")
        session.fault_injection = injection
        session.save(update_fields=["fault_injection", "updated_at"])
        record_audit(action=AuditEntry.Action.FAULT_INJECTION, actor=actor, session=session,
                     detail={"fault": fault, "before": before})
    return session




# --- what the session page says of its faults -----------------------------------------------------------------------

# Implementation (what an attempt records) → the simulator endpoint its model call reaches (faults.APPLIES_TO).
ENDPOINT_OF_IMPLEMENTATION = {"responses": "responses", "responses_compact": "compact",
                              "responses_compaction_v2": "responses_v2"}


@dataclass(frozen=True)
class FaultLine:
    """One injected fault in plain words: what it does, which requests it hits, how many it has left and when it
    last fired (as counted by the simulator in this process)."""

    name: str
    does: str
    hits: str
    limit: str
    fired: int | None  # None: no firing seen in this process
    last_fired_at: datetime | None
    left: int | None  # None: unlimited, or not counted here
    endpoints: frozenset[str]
    counted: bool = True  # False: the firings are counted on Celery workers, not in this process


def fault_lines(*, session_id: int, fault_injection: dict | None) -> list[FaultLine]:
    """The session's injected faults in words (its `fault_injection["fault"]`, the simulator's X-Sim-Fault).

    Which requests: every request the session sends to the simulated model, turns and compactions alike
    (sessions_app.turns.services._client_for and compactions.services both send the session's headers), unless its
    simulator scenario scoped the fault to compactions (fleet.runtime._sampling_faults); within those, the
    endpoints the fault applies to (faults.APPLIES_TO)."""
    spec = (fault_injection or {}).get("fault") or ""
    try:
        parsed = sim_faults.parse_faults(spec)
    except sim_faults.FaultSyntaxError:
        return []
    if not spec:
        return []
    run = SimulatorRun.objects.filter(session_id=session_id).only("state").first()
    compaction_only = run is not None and (run.state or {}).get("fault_scope") == "compaction"
    scope = ("its compactions only (its scenario scoped the fault to them)" if compaction_only
             else "its turns and its compactions alike")
    # With a broker, turns and compactions run on Celery workers, whose simulators count the firings: this process
    # cannot see them, so none is claimed (counted: None) rather than "not fired yet".
    counted_here = not background.uses_broker()
    lines = []
    for fault in parsed:
        use = embedded_fault_use(fault.name, fault.key) if counted_here else None
        fired = use.fired if use else None
        does = sim_faults.EFFECTS[fault.name]
        if fault.name == "slow":
            does = f"waits {fault.seconds:g} s before answering"
        left = None if fault.times is None or not counted_here else max(0, fault.times - (fired or 0))
        limit = ("every request it applies to, until cleared" if fault.times is None
                 else f"the next {fault.times} request{'s' if fault.times != 1 else ''} it applies to")
        lines.append(FaultLine(
            name=fault.name, does=does, hits=f"{scope}: {sim_faults.requests_hit(fault.name)}", limit=limit,
            fired=fired, last_fired_at=(datetime.fromtimestamp(use.last_fired_at, tz=UTC) if use else None),
            left=left, endpoints=frozenset(sim_faults.APPLIES_TO[fault.name]), counted=counted_here,
        ))
    return lines


# Sessions that send no request of their own to the session's provider: a followed (or still importing) file is
# read-only, and a gateway session's requests go to its client's upstream (gateway_app.recording.GATEWAY_SOURCE, a
# floor above this one). A fault set on them would never fire (issue 47 item 8).
NO_OWN_REQUESTS = (*READ_ONLY_SOURCES, "gateway")


def faults_apply(*, session: Session) -> bool:
    """Whether a simulated-model fault can hit this session's requests: its turns or its compactions go to the
    embedded simulated model (a real provider ignores the fault headers)."""
    return session.source not in NO_OWN_REQUESTS and session.provider.is_embedded


def fault_panel(*, session: Session) -> dict:
    """What the session page's fault panel shows: each fault in words, and the retries that may absorb a fault
    limited to a few requests (a compaction retries a failed model call before it fails)."""
    return {
        "lines": fault_lines(session_id=session.pk, fault_injection=session.fault_injection),
        "stream_retries": stream_max_retries(provider=session.provider, policy=session.policy),
        "request_retries": request_max_retries(provider=session.provider, policy=session.policy),
    }


def recovery_warning(*, lines: list[FaultLine], method: str) -> str:
    """What to say when a recovery is asked for while a fault that hits its model call is on ('' otherwise)."""
    endpoint = ENDPOINT_OF_IMPLEMENTATION.get(IMPLEMENTATIONS[Strategy(method)].value)
    hitting = [ln.name.replace("_", " ") for ln in lines if endpoint in ln.endpoints and ln.left != 0]
    if not hitting:
        return ""
    return (f"An injected fault ({', '.join(hitting)}) is on for this session and hits this recovery's model call: "
            "it will fail while the fault lasts. Clear it under Fault injection on the session page.")


def fault_blamed(*, lines: list[FaultLine], attempt: dict | None) -> str:
    """Why a failed compaction attempt is the injected fault's doing, in words ('' when it is not): its model call
    went to an endpoint an active fault with requests left applies to (certain when the simulator's error says
    `fault injected`)."""
    if not attempt or attempt.get("status") != "failed":
        return ""
    endpoint = ENDPOINT_OF_IMPLEMENTATION.get(str(attempt.get("implementation")))
    hitting = [ln for ln in lines if endpoint in ln.endpoints and ln.left != 0]
    if not hitting:
        return ""
    names = ", ".join(ln.name.replace("_", " ") for ln in hitting)
    certain = "fault injected" in str(attempt.get("error_message") or "")
    return (f"{'This failure is' if certain else 'This failure is likely'} the injected fault ({names}): it hits "
            "this session's compaction requests. Clear it under Fault injection, then recover.")


__all__ = ["FaultInjectionError", "FaultLine", "do_set_session_faults", "fault_blamed", "fault_lines", "fault_panel",
           "recovery_warning"]
