"""Who may put text into the model's instructions of an existing session (README, "Roles"; issue 27).

One rule for every path that does: appending compaction items or developer/system messages
(`POST /sessions/<id>/items`), pinning context (the pins are re-injected as a developer message after every
compaction) and turn settings written into developer messages (`POST /sessions/<id>/turns` with approval_policy,
sandbox_policy or model), and importing a rollout file that holds any of these (`POST /sessions/import`, the
import page: a session imported with developer text would put it before the model at its next turn or replay).
Operators record turns and user messages; instructing the model needs the support role.
"""

from __future__ import annotations

from compactweb.api_errors import ApiError
from compactweb.roles import SUPPORT, has_role

INSTRUCTING_ROLE = SUPPORT
PIN_PATH = "pin"


def may_instruct(user) -> bool:
    return has_role(user, INSTRUCTING_ROLE)


def refusal(path: str) -> str:
    return (f"{path}: putting a compaction, a pin or developer/system text into a session needs the "
            f"{INSTRUCTING_ROLE} role")


def ensure_may_instruct(user, paths: list[str]) -> None:
    """Raise a 403 in the API's error shape when `paths` (what the request would put into the model's
    instructions) is not empty and `user` lacks the support role; checked before anything is stored."""
    if paths and not may_instruct(user):
        raise ApiError(status_code=403, code="permission_denied", message=refusal(paths[0]))
