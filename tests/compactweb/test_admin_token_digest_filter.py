"""The admin role cannot enumerate API-token digests through the user list's filters (issue 42): Django 5.2.19
let `?auth_token_set__digest__startswith=` narrow the user list one character at a time (an oracle on every
user's token digest); 5.2.20, the pinned version, refuses any lookup the admin does not list. This test passes on
5.2.20 and fails on 5.2.19 (both tried)."""

from __future__ import annotations

import pytest
from knox.models import AuthToken

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("lookup", ["auth_token_set__digest__startswith", "auth_token_set__digest",
                                    "auth_token_set__token_key__startswith"])
def test_the_user_list_refuses_filtering_by_a_tokens_digest(client, admin_user_role, make_user, lookup):
    victim = make_user("operator")
    _, _secret = AuthToken.objects.create(user=victim)
    digest = AuthToken.objects.get(user=victim).digest
    admin_user_role.is_staff = True
    admin_user_role.save(update_fields=["is_staff"])
    client.force_login(admin_user_role)

    response = client.get(f"/admin/auth/user/?{lookup}={digest[:1]}")

    assert response.status_code == 400
    assert victim.get_username().encode() not in response.content
