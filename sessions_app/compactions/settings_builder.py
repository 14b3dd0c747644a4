"""Map configuration rows (Provider, CompactionPolicy, Hook, Session) to the engine's plain settings objects.

The engine and the provider clients know nothing of Django; this module is the one place that reads the rows and
builds `CompactionSettings`, `ProviderConfig` and `HookSpec`s from them (spec §2.2, §2.5, §6.4, §7, §12). The turn
loop uses the same functions, so a turn and a compaction of one session always see the same settings.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from compaction_app.engine.hooks import HookSpec
from compaction_app.engine.items import Item
from compaction_app.engine.prompts import SUMMARIZATION_PROMPT, prompt_version
from compaction_app.engine.settings import CompactionSettings
from compaction_app.models import CompactionPolicy, Hook, Provider
from compaction_app.providers.config import ProviderConfig
from compaction_app.providers.simulated.faults import (
    CONTEXT_WINDOW_HEADER,
    FAULT_HEADER,
    REASONING_INCLUDED_HEADER,
    parse_faults,
)
from compaction_app.validators import (
    header_env_problem,
    key_url_problem,
    outbound_url_problem,
    secret_env_allowed,
)
from sessions_app.simulator.initial_context import ContextWindowIds, context_window_message

# Reasoning settings sent when the provider's models reason (Codex's defaults: medium effort, auto summary).
DEFAULT_REASONING = {"effort": "medium", "summary": "auto"}

# session.fault_injection keys → the simulated provider's request headers (compaction_app.providers.simulated.faults).
FAULT_KEYS = {
    "fault": FAULT_HEADER,
    "context_window": CONTEXT_WINDOW_HEADER,
    "reasoning_included": REASONING_INCLUDED_HEADER,
}

CONTEXT_WINDOW_BLOCK = "<context_window>"

logger = logging.getLogger(__name__)


def allowed_api_key_env(*, provider: Provider) -> str:
    """The provider's api_key_env when the deployment allows it, else "" (no key is sent). Rows written before the
    rule existed (or before the operator narrowed it) are checked here too, so no secret outside the rule leaves."""
    name = provider.api_key_env
    if name and not secret_env_allowed(name):
        logger.warning("provider %s names api_key_env %s, which the deployment does not allow; sending no key",
                       provider.name, name)
        return ""
    problem = key_url_problem(name, provider.base_url) if name else None
    if problem:  # issue 27: the key goes only where the deployment bound it
        logger.warning("provider %s: sending no key: %s", provider.name, problem)
        return ""
    return name


def allowed_header_envs(*, provider: Provider) -> dict[str, str]:
    """The provider's `header_envs` entries the deployment allows now (the api_key_env rule); others are dropped
    with a warning, so no variable outside the rule is ever read into a request."""
    allowed = {}
    for header, name in dict(provider.header_envs or {}).items():
        problem = header_env_problem(header, name) or key_url_problem(name, provider.base_url)
        if problem:
            logger.warning("provider %s: header %r not sent: %s", provider.name, header, problem)
            continue
        allowed[header] = name
    return allowed


class FaultInjectionError(ValueError):
    """A session's fault_injection value cannot be turned into simulator headers."""


def fault_headers(fault_injection: dict[str, Any] | None) -> dict[str, str]:
    """The simulator headers a session's `fault_injection` asks for.

    Shape: `{"fault": "<X-Sim-Fault value>", "context_window": <tokens>, "reasoning_included": true}`, every key
    optional; e.g. `{"fault": "overloaded;times=2;key=s1"}` fails the next two requests with HTTP 429. Unknown keys
    and malformed fault specs are refused with a clear message.
    """
    if not fault_injection:
        return {}
    if not isinstance(fault_injection, dict):
        raise FaultInjectionError("fault_injection must be an object like {\"fault\": \"overloaded;times=1\"}")
    unknown = sorted(set(fault_injection) - set(FAULT_KEYS))
    if unknown:
        raise FaultInjectionError(
            f"fault_injection: unknown key(s) {', '.join(unknown)}; known: {', '.join(FAULT_KEYS)}"
        )
    headers: dict[str, str] = {}
    fault = fault_injection.get("fault")
    if fault:
        try:
            parse_faults(str(fault))
        except ValueError as exc:
            raise FaultInjectionError(f"fault_injection.fault: {exc}") from None
        headers[FAULT_HEADER] = str(fault)
    window = fault_injection.get("context_window")
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
            raise FaultInjectionError("fault_injection.context_window must be a positive integer")
        headers[CONTEXT_WINDOW_HEADER] = str(window)
    if fault_injection.get("reasoning_included"):
        headers[REASONING_INCLUDED_HEADER] = "true"
    return headers


def stream_max_retries(*, provider: Provider, policy: CompactionPolicy) -> int:
    """The policy's override, else the provider's value (spec §6.2, §12)."""
    return provider.stream_max_retries if policy.stream_max_retries is None else policy.stream_max_retries


def request_max_retries(*, provider: Provider, policy: CompactionPolicy) -> int:
    return provider.request_max_retries if policy.request_max_retries is None else policy.request_max_retries


def fallback_model(*, provider: Provider, policy: CompactionPolicy) -> str:
    """The configured fallback model: the policy's, else the provider's ("" = none)."""
    return policy.fallback_model or provider.fallback_model


def compact_prompt(*, policy: CompactionPolicy) -> str | None:
    """The local summarisation prompt: `compact_prompt`, else the stored prompt's text, else None (the engine then
    uses SUMMARIZATION_PROMPT). Both set is refused by `CompactionPolicy.clean` (spec §12)."""
    if policy.compact_prompt.strip():
        return policy.compact_prompt
    if policy.prompt_id:
        return policy.prompt.text
    return None


DEFAULT_PROMPT_NAME = "default (Codex's SUMMARIZATION_PROMPT)"
RETRY_PROMPT_SUFFIX = " (retention retry prompt)"  # how a compaction names the retention retry prompt it used


def prompt_names(*, policy: CompactionPolicy) -> dict[str, str]:
    """What a compaction of this policy records as the name of each prompt it may summarise with, by text: the
    default, the policy's own compact_prompt, its stored prompt, its retention retry prompt (read when the
    compaction is planned, so an edit while it runs does not relabel it)."""
    names = {SUMMARIZATION_PROMPT: DEFAULT_PROMPT_NAME}
    if policy.retention_retry_prompt_id:
        names[policy.retention_retry_prompt.text] = f"{policy.retention_retry_prompt.name}{RETRY_PROMPT_SUFFIX}"
    if policy.prompt_id:
        names[policy.prompt.text] = policy.prompt.name
    if policy.compact_prompt.strip():
        names[policy.compact_prompt] = f"compact_prompt of policy {policy.name}"
    return names


def prompt_record(*, names: dict[str, str], text: str | None) -> dict[str, str | None]:
    """The compaction row's prompt fields: the prompt's name and version, both None when no prompt was sent."""
    if text is None:
        return {"prompt_name": None, "prompt_version": None}
    return {"prompt_name": names.get(text, "a prompt no longer configured"), "prompt_version": prompt_version(text)}


def provider_config(
    *, provider: Provider, policy: CompactionPolicy | None = None, fault_injection: dict[str, Any] | None = None,
    model: str | None = None,
) -> ProviderConfig:
    """The ProviderConfig of a Provider row; `fault_injection` (a session's) becomes simulator headers and
    `policy` overrides the retry counts."""
    retries = dict(stream_max_retries=provider.stream_max_retries, request_max_retries=provider.request_max_retries)
    # Issue 27: the outbound rule again before any send (a row saved under an older rule, a name that moved to a
    # private address); a refused provider is reached by nothing and gets no key.
    refused = "" if provider.is_embedded else (outbound_url_problem(provider.base_url) or "")
    if refused:
        logger.warning("provider %s: not sending to its base URL: %s", provider.name, refused)
    if policy is not None:
        retries = dict(
            stream_max_retries=stream_max_retries(provider=provider, policy=policy),
            request_max_retries=request_max_retries(provider=provider, policy=policy),
        )
    return ProviderConfig(
        name=provider.name,
        model=model or provider.model,
        base_url=provider.base_url,
        wire_api=provider.wire_api,
        fallback_model=(fallback_model(provider=provider, policy=policy) if policy else provider.fallback_model),
        context_window=provider.context_window,
        effective_context_window_percent=provider.effective_context_window_percent,
        remote_compaction=provider.remote_compaction,
        api_key_env="" if refused else allowed_api_key_env(provider=provider),
        connect_timeout=provider.connect_timeout,
        read_timeout=provider.read_timeout,
        extra_headers=fault_headers(fault_injection),
        header_envs={} if refused else allowed_header_envs(provider=provider),
        refused=refused,
        **retries,
    )


def compaction_settings(
    *,
    provider: Provider,
    policy: CompactionPolicy,
    model: str | None = None,
    thread_id: str = "",
    base_instructions: str = "",
    tools: tuple[dict[str, Any], ...] = (),
    parallel_tool_calls: bool | None = None,
) -> CompactionSettings:
    """CompactionSettings for one compaction (spec §12): window and remote support from the provider, limit,
    scope, counter, strategy, switches, prompt, budgets and retries from the policy (its overrides win).
    `model` is the model that compacts (the previous one for model_downshift / comp_hash_changed, §2.4)."""
    return CompactionSettings(
        model=model or provider.model,
        context_window=provider.context_window,
        effective_percent=provider.effective_context_window_percent,
        auto_compact_token_limit=policy.auto_compact_token_limit,
        scope=policy.auto_compact_scope,
        token_counter=policy.counter_name(provider),
        strategy=policy.strategy,
        remote_compaction=provider.remote_compaction,
        remote_compaction_v2=policy.remote_compaction_v2,
        token_budget=policy.token_budget,
        compact_prompt=compact_prompt(policy=policy),
        user_message_budget=policy.user_message_budget,
        retained_message_budget=policy.retained_message_budget,
        stream_max_retries=stream_max_retries(provider=provider, policy=policy),
        request_max_retries=request_max_retries(provider=provider, policy=policy),
        base_instructions=base_instructions,
        tools=tools,
        parallel_tool_calls=bool(tools) if parallel_tool_calls is None else parallel_tool_calls,
        reasoning=dict(DEFAULT_REASONING) if provider.supports_reasoning else None,
        supports_images=provider.supports_images,
        prompt_cache_key=thread_id or None,
        thread_id=thread_id,
        masking_keep_turns=policy.masking_keep_turns,
        masking_keep_tokens=policy.masking_keep_tokens,
        masking_summarise=policy.masking_summarise,
        retention_probes=policy.retention_probes,
        pin_mode=policy.pin_mode,
        retention_floor=policy.retention_flag_below,
        retry_prompt=policy.retention_retry_prompt.text if policy.retention_retry_prompt_id else None,
    )


def switched_model_settings(
    settings: CompactionSettings, *, model: str, context_window: int | None = None
) -> CompactionSettings:
    """The same settings for another model and its window (the current-model fallback of spec §6.4)."""
    if context_window is None:
        return replace(settings, model=model)
    return replace(settings, model=model, context_window=context_window)


def hook_runner_limits() -> dict[str, Any]:
    """The deployment's hook limits as HookRunner keyword arguments (issue 14, docs/security.md)."""
    from django.conf import settings

    return {
        "callable_prefixes": tuple(settings.COMPACTWEB_HOOK_CALLABLE_PREFIXES),
        "max_response_bytes": settings.COMPACTWEB_HOOK_MAX_RESPONSE_BYTES,
        "max_timeout": settings.COMPACTWEB_HOOK_MAX_TIMEOUT,
        "url_check": outbound_url_problem,
    }


def hook_specs(*, hooks: list[Hook]) -> list[HookSpec]:
    """HookSpecs of the enabled hooks, in a stable order (by name, as the admin lists them; spec §7)."""
    return [
        HookSpec(name=h.name, event=h.event, kind=h.kind, target=h.target, matcher=h.matcher,
                 timeout=h.timeout_seconds)
        for h in sorted(hooks, key=lambda h: h.name)
        if h.enabled
    ]


def render_initial_context(
    items: list[Item], *, thread_id: str, first_window_id: str, current_window_id: str,
    previous_window_id: str | None,
) -> list[Item]:
    """The session's initial context as injected into a new window (spec §4.4, §5.3): a `<context_window>`
    developer block, when the session has one, is re-rendered with the ids of the window being opened."""
    rendered = []
    for item in items:
        if _is_context_window_block(item):
            item = context_window_message(ContextWindowIds(
                thread_id=thread_id, first_window_id=first_window_id, current_window_id=current_window_id,
                previous_window_id=previous_window_id,
            ))
        rendered.append(item)
    return rendered


def _is_context_window_block(item: Item) -> bool:
    if item.get("type") != "message" or item.get("role") != "developer":
        return False
    content = item.get("content")
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return False
    return str(content[0].get("text", "")).lstrip().startswith(CONTEXT_WINDOW_BLOCK)
