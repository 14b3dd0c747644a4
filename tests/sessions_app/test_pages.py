"""Pages: anonymous users see only the login page; the fleet page needs the operator role."""

import pytest


def test_anonymous_users_are_sent_to_the_login_page(client, db):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/")


def test_the_login_page_renders_and_logs_in(client, make_user):
    make_user("operator", username="olga", password="a-long-test-password")
    page = client.get("/login/")
    assert page.status_code == 200 and b"Log in" in page.content
    response = client.post("/login/", {"username": "olga", "password": "a-long-test-password"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_a_wrong_password_shows_an_error_and_stays_logged_out(client, make_user):
    make_user("operator", username="olga", password="a-long-test-password")
    response = client.post("/login/", {"username": "olga", "password": "wrong"})
    assert response.status_code == 200 and b"did not match" in response.content
    assert client.get("/").status_code == 302


def test_a_user_without_a_role_gets_403_on_the_fleet(client, make_user):
    client.force_login(make_user(None))
    assert client.get("/").status_code == 403


def test_the_fleet_lists_sessions_with_their_meter(client, make_user, make_session, items_factory):
    session = make_session(title="build the parser", items=[items_factory.user("go")])
    client.force_login(make_user("operator"))
    body = client.get("/").content.decode()
    assert "build the parser" in body
    assert f'id="session-{session.pk}"' in body
    assert f'aria-valuemax="32000" aria-valuenow="{session.tokens_in_window}"' in body


def test_logout_is_a_post_and_ends_the_session(client, make_user):
    client.force_login(make_user("operator"))
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


@pytest.mark.parametrize("path", ["/static/css/compactweb.css"])
def test_static_files_are_served_without_collectstatic(client, db, path):
    response = client.get(path)
    assert response.status_code == 200
