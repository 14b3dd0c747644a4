"""Open websockets end soon after their user's access changes (issue 27).

A websocket is authenticated once, at connect; before this, a page kept streaming after its user lost the role, was
deactivated, changed password or logged out. Every live consumer joins its user's group (`user_group`); a change
that can take access away sends `auth.changed` to that group once the transaction commits, and the consumer re-reads
its user from a fresh copy of its session (the session auth hash, `is_active`, the role) and closes with 4401 or
4403 when the user no longer passes. A change made behind the ORM's back (SQL) is caught by each consumer's
periodic re-check (`COMPACTWEB_WS_AUTH_RECHECK_SECONDS`).
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save

logger = logging.getLogger(__name__)

AUTH_CHANGED = "auth.changed"
# Saves that change nothing about access: the login itself (django.contrib.auth.update_last_login).
_HARMLESS_FIELDS = frozenset({"last_login"})


def user_group(user_id: int) -> str:
    return f"auth.user.{int(user_id)}"


def _send(user_ids: set[int]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    for user_id in sorted(user_ids):
        try:
            async_to_sync(layer.group_send)(user_group(user_id), {"type": AUTH_CHANGED})
        except Exception:  # the layer is down: the consumers' periodic re-check still ends the sockets
            logger.warning("could not tell user %s's websockets that their access changed", user_id)


def notify_users(user_ids) -> None:
    """Tell the users' open websockets to re-check, once the current transaction (if any) commits."""
    ids = {int(i) for i in user_ids if i is not None}
    if ids:
        transaction.on_commit(lambda: _send(ids))


def _user_saved(sender, instance, created, update_fields=None, **kwargs) -> None:
    if created or (update_fields is not None and set(update_fields) <= _HARMLESS_FIELDS):
        return
    notify_users([instance.pk])


def _user_deleted(sender, instance, **kwargs) -> None:
    notify_users([instance.pk])


def _groups_changed(sender, instance, action, reverse, pk_set, **kwargs) -> None:
    if reverse:  # group.user_set.add/remove/clear: the users are in pk_set (clear: read before it happens)
        if action == "pre_clear":
            instance._compactweb_cleared_users = list(instance.user_set.values_list("pk", flat=True))
        elif action == "post_clear":
            notify_users(getattr(instance, "_compactweb_cleared_users", []))
        elif action in ("post_add", "post_remove"):
            notify_users(pk_set or [])
    elif action in ("post_add", "post_remove", "post_clear"):
        notify_users([instance.pk])


def _logged_out(sender, request, user, **kwargs) -> None:
    if user is not None:
        notify_users([user.pk])


def connect_signals() -> None:
    user_model = get_user_model()
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="compactweb_ws_user_saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="compactweb_ws_user_deleted")
    m2m_changed.connect(_groups_changed, sender=user_model.groups.through, dispatch_uid="compactweb_ws_groups")
    user_logged_out.connect(_logged_out, dispatch_uid="compactweb_ws_logged_out")
