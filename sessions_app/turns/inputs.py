"""What a turn accepts: the user's input and a settings change, checked before anything is recorded."""

from __future__ import annotations

from typing import Any

from compactweb.domain_errors import Invalid
from sessions_app.rollout.validation import ItemValidationError, validate_item
from sessions_app.turns.loop import SETTINGS_KEYS

MAX_INPUT_CHARS = 1_000_000


class TurnInputError(Invalid, ValueError):
    """The turn's user input is not acceptable; nothing was recorded."""


USER_INPUT_PART_TYPES = ("input_text", "input_image")


def validate_user_input(user_input: Any) -> str | list[dict[str, Any]]:
    """The turn's user input: a non-empty string, or a Codex-shaped list of content items (`input_text` and
    `input_image` parts, at least one of them carrying text or an image)."""
    if isinstance(user_input, list):
        if not user_input:
            raise TurnInputError("input: must be a non-empty string or a non-empty list of content items")
        try:
            validate_item({"type": "message", "role": "user", "content": user_input}, "input")
        except ItemValidationError as exc:
            raise TurnInputError(str(exc).replace("input.content", "input", 1)) from None
        for i, part in enumerate(user_input):
            if part.get("type") not in USER_INPUT_PART_TYPES:
                raise TurnInputError(f"input[{i}].type: must be one of {', '.join(USER_INPUT_PART_TYPES)}")
        size = sum(len(p.get("text") or "") + len(p.get("image_url") or "") for p in user_input)
        if size > MAX_INPUT_CHARS:
            raise TurnInputError(f"input: at most {MAX_INPUT_CHARS} characters, got {size}")
        if not any((p.get("text") or "").strip() or p.get("type") == "input_image" for p in user_input):
            raise TurnInputError("input: the content items carry no text and no image")
        return user_input
    if not isinstance(user_input, str) or not user_input.strip():
        raise TurnInputError("input: must be a non-empty string or a non-empty list of content items")
    if len(user_input) > MAX_INPUT_CHARS:
        raise TurnInputError(f"input: at most {MAX_INPUT_CHARS} characters, got {len(user_input)}")
    return user_input



def validate_settings_change(settings: Any) -> dict[str, Any]:
    """A turn's settings change: an object with any of cwd, approval_policy (strings), sandbox_policy (a string
    or an object) and model (a string). Anything else is refused before anything is recorded."""
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise TurnInputError("settings: must be an object")
    unknown = sorted(set(settings) - set(SETTINGS_KEYS))
    if unknown:
        raise TurnInputError(f"settings.{unknown[0]}: unknown setting; choose from {', '.join(SETTINGS_KEYS)}")
    for key, value in settings.items():
        ok = isinstance(value, str) and value.strip() or (key == "sandbox_policy" and isinstance(value, dict))
        if not ok:
            raise TurnInputError(f"settings.{key}: must be a non-empty string"
                                 + (" or an object" if key == "sandbox_policy" else ""))
    return dict(settings)

