"""Issue 14: the role groups cannot be deleted or renamed and come back after migrate; the admin role cannot grant
superuser, touch a superuser, grant permissions it lacks, or read anyone's API token."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
from django.db import transaction
from django.test import Client

from compactweb.api_tokens import issue_token
from compactweb.role_permissions import FULL_APPS, VIEW_APPS, RoleGroupProtected
from compactweb.roles import ROLES


@pytest.fixture
def admin_client(make_user):
    """A member of the admin role group in the Django admin (not a superuser)."""
    user = make_user("admin")
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    client.user = user
    return client


def _user_form(user, **changes) -> dict:
    """The admin's user change form as a browser posts it."""
    data = {"username": user.username, "is_active": "on", "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
            "groups": [g.pk for g in user.groups.all()], "initial-date_joined_0": "2026-01-01",
            "initial-date_joined_1": "00:00:00"}
    data.update(changes)
    return data


@pytest.mark.parametrize("name", ROLES)
def test_a_role_group_cannot_be_deleted_or_renamed_through_the_orm(db, name):
    group = Group.objects.get(name=name)
    with pytest.raises(RoleGroupProtected), transaction.atomic():
        group.delete()
    group.name = "renamed"
    with pytest.raises(RoleGroupProtected), transaction.atomic():
        group.save()
    assert Group.objects.filter(name=name).exists()


@pytest.mark.parametrize("name", ROLES)
def test_the_admin_cannot_delete_a_role_group(admin_client, name):
    group = Group.objects.get(name=name)
    response = admin_client.post(f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    response = admin_client.post("/admin/auth/group/", {"action": "delete_selected", "_selected_action": [group.pk],
                                                        "post": "yes"})
    assert Group.objects.filter(name=name).exists()


def test_the_admin_cannot_rename_a_role_group_or_change_its_permissions(admin_client):
    group = Group.objects.get(name="operator")
    url = f"/admin/auth/group/{group.pk}/change/"
    page = admin_client.get(url)
    assert "name" not in page.context["adminform"].form.fields
    assert "permissions" not in page.context["adminform"].form.fields
    admin_client.post(url, {"name": "pwned", "permissions": [Permission.objects.first().pk]})
    group.refresh_from_db()
    assert group.name == "operator" and group.permissions.count() == 0


def test_an_ordinary_group_can_still_be_managed(admin_client):
    group = Group.objects.create(name="night shift")
    assert admin_client.post(f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Group.objects.filter(name="night shift").exists()


def test_migrate_recreates_a_role_group_deleted_behind_the_guards_back(db):
    Group.objects.filter(name="support")._raw_delete(using="default")  # SQL, no signals
    Group.permissions.through.objects.filter(group__name="admin")._raw_delete(using="default")
    # The last app's permissions too: migrate creates them again on that app's signal, before the grant may run.
    Permission.objects.filter(content_type__app_label="gateway_app")._raw_delete(using="default")
    call_command("migrate", verbosity=0)
    assert Group.objects.filter(name="support").exists()
    # Every permission of the admin role again, those of the last app migrated (the gateway's) included.
    granted = set(Group.objects.get(name="admin").permissions.values_list("content_type__app_label", "codename"))
    expected = set(Permission.objects.filter(content_type__app_label__in=FULL_APPS).values_list(
        "content_type__app_label", "codename")) | set(Permission.objects.filter(
            content_type__app_label__in=VIEW_APPS, codename__startswith="view_").values_list(
            "content_type__app_label", "codename"))
    assert ("compaction_app", "change_provider") in granted and ("gateway_app", "change_gatewayroute") in granted
    assert granted == expected


def test_the_admin_cannot_make_anyone_a_superuser(admin_client, make_user):
    target = make_user("operator")
    url = f"/admin/auth/user/{target.pk}/change/"
    assert "is_superuser" not in admin_client.get(url).context["adminform"].form.fields
    response = admin_client.post(url, _user_form(target, is_superuser="on", is_staff="on"))
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    target.refresh_from_db()
    assert target.is_staff and not target.is_superuser
    admin_client.user.refresh_from_db()
    assert not admin_client.user.is_superuser


def test_the_admin_cannot_change_delete_or_reset_a_superuser(admin_client):
    root = User.objects.create_superuser("root", password="root-password-for-tests")
    assert admin_client.post(f"/admin/auth/user/{root.pk}/password/",
                             {"password1": "x-new-pass-123", "password2": "x-new-pass-123"}).status_code == 403
    assert admin_client.post(f"/admin/auth/user/{root.pk}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.post(f"/admin/auth/user/{root.pk}/change/", _user_form(root, is_active="")).status_code == 403
    root.refresh_from_db()
    assert root.is_active and root.check_password("root-password-for-tests")


def test_the_admin_can_grant_only_permissions_it_holds(admin_client, make_user):
    target = make_user(None)
    url = f"/admin/auth/user/{target.pk}/change/"
    offered = admin_client.get(url).context["adminform"].form.fields["user_permissions"].queryset
    assert offered.filter(content_type__app_label="compaction_app").exists()
    assert not offered.filter(content_type__app_label="knox").exists()  # no way to API tokens
    assert not offered.filter(codename="delete_rolloutline").exists()
    token_perm = Permission.objects.get(codename="add_authtoken")
    admin_client.post(url, _user_form(target, user_permissions=[token_perm.pk]))
    assert not target.user_permissions.filter(pk=token_perm.pk).exists()


def test_the_admin_cannot_read_any_token(admin_client, make_user):
    token = issue_token(user=make_user("operator"))
    assert admin_client.get("/admin/knox/authtoken/").status_code == 403
    assert token not in admin_client.get("/admin/").content.decode()


def _powerful_group():
    """A group a superuser made with a right the admin role lacks (reading API tokens)."""
    group = Group.objects.create(name="token readers")
    group.permissions.add(Permission.objects.get(codename="view_authtoken"))
    return group


def test_the_admin_cannot_put_itself_or_anyone_into_a_group_with_rights_it_lacks(admin_client, make_user):
    powerful = _powerful_group()
    ordinary = Group.objects.create(name="night shift")
    ordinary.permissions.add(Permission.objects.get(codename="view_provider"))
    me = admin_client.user
    for target in (me, make_user("operator")):
        url = f"/admin/auth/user/{target.pk}/change/"
        offered = admin_client.get(url).context["adminform"].form.fields["groups"].queryset
        assert not offered.filter(pk=powerful.pk).exists() and offered.filter(pk=ordinary.pk).exists()
        groups = [g.pk for g in target.groups.all()]
        staff = {"is_staff": "on"} if target.is_staff else {}
        response = admin_client.post(url, _user_form(target, groups=[*groups, powerful.pk], **staff))
        assert response.status_code == 200 and "groups" in response.context["adminform"].form.errors
        assert not target.groups.filter(pk=powerful.pk).exists()
        assert admin_client.post(url, _user_form(target, groups=[*groups, ordinary.pk], **staff)).status_code == 302
        assert target.groups.filter(pk=ordinary.pk).exists()
    me = User.objects.get(pk=me.pk)
    assert not me.has_perm("knox.view_authtoken")
    assert admin_client.get("/admin/knox/authtoken/").status_code == 403


def test_editing_a_user_already_in_such_a_group_keeps_the_membership(admin_client, make_user):
    powerful = _powerful_group()
    target = make_user("operator")
    target.groups.add(powerful)
    url = f"/admin/auth/user/{target.pk}/change/"
    assert admin_client.post(url, _user_form(target, first_name="Ada")).status_code == 302
    target.refresh_from_db()
    assert target.first_name == "Ada" and target.groups.filter(pk=powerful.pk).exists()
    operator = Group.objects.get(name="operator")
    assert admin_client.post(url, _user_form(target, groups=[operator.pk])).status_code == 302  # may remove it
    assert not target.groups.filter(pk=powerful.pk).exists()
