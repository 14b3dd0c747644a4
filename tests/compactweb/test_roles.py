"""Roles are groups with a hierarchy admin ⊃ support ⊃ operator; superusers are admins (design: roles)."""

import pytest
from django.contrib.auth.models import AnonymousUser, Group

from compactweb import roles


def test_the_role_groups_exist_after_migration(db):
    assert set(Group.objects.filter(name__in=roles.ROLES).values_list("name", flat=True)) == set(roles.ROLES)


@pytest.mark.parametrize(
    ("held", "expected"),
    [
        (None, {"operator": False, "support": False, "admin": False}),
        ("operator", {"operator": True, "support": False, "admin": False}),
        ("support", {"operator": True, "support": True, "admin": False}),
        ("admin", {"operator": True, "support": True, "admin": True}),
    ],
)
def test_has_role_follows_the_hierarchy(make_user, held, expected):
    user = make_user(held)
    assert {role: roles.has_role(user, role) for role in roles.ROLES} == expected


def test_superusers_and_anonymous_and_inactive_users(make_user, admin_user):
    assert roles.has_role(admin_user, roles.ADMIN)
    assert not roles.has_role(AnonymousUser(), roles.OPERATOR)
    inactive = make_user("admin")
    inactive.is_active = False
    assert not roles.has_role(inactive, roles.OPERATOR)


def test_unknown_role_names_are_a_programming_error(make_user):
    with pytest.raises(ValueError, match="unknown role"):
        roles.has_role(make_user("operator"), "superhero")


def test_websocket_scope_check_uses_the_scope_user(make_user):
    assert roles.scope_has_role({"user": make_user("support")}, roles.SUPPORT)
    assert not roles.scope_has_role({"user": make_user("operator")}, roles.SUPPORT)
    assert not roles.scope_has_role({}, roles.OPERATOR)


def test_admin_group_gets_django_admin_permissions(db):
    group = Group.objects.get(name=roles.ADMIN)
    codenames = set(group.permissions.values_list("codename", flat=True))
    assert {"change_compactionpolicy", "add_provider", "change_user", "view_rolloutline"} <= codenames
    assert "change_rolloutline" not in codenames


def test_a_users_role_is_read_in_one_statement_and_other_groups_do_not_count(make_user, django_assert_num_queries):
    user = make_user("support")
    user.groups.add(Group.objects.create(name="auditors"), Group.objects.get(name=roles.OPERATOR))
    fresh = type(user).objects.get(pk=user.pk)
    with django_assert_num_queries(1):
        assert roles.role_of(fresh) == roles.SUPPORT
        assert roles.has_role(fresh, roles.OPERATOR) and not roles.has_role(fresh, roles.ADMIN)  # remembered
    only_other = make_user(None)
    only_other.groups.add(Group.objects.get(name="auditors"))
    assert roles.role_of(only_other) is None
