"""The archives' JSON API (sessions_app/web/api/archives.py): an admin lists the archive records a keyset page at a
time, reads one and restores one; operators and support are refused as in Django admin; a second restore, a
missing file and a changed file answer 409 in the API's error shape and change nothing."""

from __future__ import annotations

import gzip

import pytest

from sessions_app.archive import services
from sessions_app.models import Session, SessionArchive

pytestmark = pytest.mark.django_db


@pytest.fixture
def archives(make_session, add_turn, age) -> list[SessionArchive]:
    """Three archived sessions, oldest first."""
    for n in range(3):
        session = make_session(title=f"old {n}")
        add_turn(session, 1)
        age(session, days=40 + n)
    services.do_run_archiver(trigger="test")
    return list(SessionArchive.objects.order_by("archived_at", "pk"))


def test_an_admin_lists_the_archives_newest_first_a_page_at_a_time(admin_api, archives):
    first = admin_api.get("/api/v1/archives", {"limit": 2})
    assert first.status_code == 200
    assert [a["id"] for a in first.json()] == [archives[2].pk, archives[1].pk]
    assert first.json()[0]["sha256"] == archives[2].sha256 and first.json()[0]["restored_at"] is None
    following = first["Link"].split(";")[0].strip("<>")
    assert "before=" in following
    second = admin_api.get(following)
    assert [a["id"] for a in second.json()] == [archives[0].pk] and "Link" not in second


def test_the_list_filters_by_when_the_archive_was_made(admin_api, archives):
    when = archives[0].archived_at
    assert len(admin_api.get("/api/v1/archives", {"since": when.isoformat()}).json()) == 3
    assert admin_api.get("/api/v1/archives", {"until": when.isoformat()}).json() == []
    response = admin_api.get("/api/v1/archives", {"since": "yesterday"})
    assert response.status_code == 400 and "since" in response.json()["error"]["message"]


def test_an_admin_reads_one_archive_and_a_missing_one_is_a_404(admin_api, archives):
    response = admin_api.get(f"/api/v1/archives/{archives[0].pk}")
    assert response.status_code == 200 and response.json()["session_id"] == archives[0].session_id
    missing = admin_api.get("/api/v1/archives/999999")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert admin_api.post("/api/v1/archives/999999/restore").status_code == 404


@pytest.mark.parametrize("role_api", ["operator_api", "support_api", "norole_api"])
def test_only_the_admin_role_sees_or_restores_archives(request, role_api, archives):
    api = request.getfixturevalue(role_api)
    for response in (
        api.get("/api/v1/archives"),
        api.get(f"/api/v1/archives/{archives[0].pk}"),
        api.post(f"/api/v1/archives/{archives[0].pk}/restore"),
    ):
        assert response.status_code == 403 and response.json()["error"]["code"] == "permission_denied"
    assert Session.objects.count() == 0


def test_an_admin_restores_an_archive_once(admin_api, archives):
    response = admin_api.post(f"/api/v1/archives/{archives[0].pk}/restore")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["archive"] == archives[0].pk
    assert Session.objects.get(pk=body["session"]).thread_id == archives[0].thread_id
    assert admin_api.get(f"/api/v1/archives/{archives[0].pk}").json()["restored_at"] is not None

    again = admin_api.post(f"/api/v1/archives/{archives[0].pk}/restore")

    assert again.status_code == 409 and again.json()["error"]["code"] == "already_imported"
    assert Session.objects.count() == 1


def test_a_missing_or_changed_file_is_refused_with_a_409(admin_api, archives, archive_dir):
    (archive_dir / archives[0].file_name).unlink()
    path = archive_dir / archives[1].file_name
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()) + b"\n"))

    for archive in archives[:2]:
        response = admin_api.post(f"/api/v1/archives/{archive.pk}/restore")
        assert response.status_code == 409, response.content
        assert response.json()["error"]["code"] == "archive_not_restorable"
    assert Session.objects.count() == 0


def test_a_page_of_archives_is_read_in_a_fixed_number_of_queries(
    admin_api, archives, django_assert_max_num_queries
):
    # Authentication, the role, the page: however many archives it holds (restored_at comes with each row).
    with django_assert_max_num_queries(4):
        assert len(admin_api.get("/api/v1/archives", {"limit": 3}).json()) == 3


def test_a_missing_files_refusal_names_the_archive_file_and_no_server_path(admin_api, archives, archive_dir):
    (archive_dir / archives[0].file_name).unlink()

    response = admin_api.post(f"/api/v1/archives/{archives[0].pk}/restore")

    message = response.json()["error"]["message"]
    assert response.status_code == 409 and archives[0].file_name in message and "No such file" in message
    assert str(archive_dir) not in message and str(archive_dir.resolve()) not in message


def test_archives_are_listed_by_when_they_were_made_then_by_id_across_pages(admin_api, archives):
    """Newest first by archived_at (a bench run's clock, or a restore-and-archive-again, makes it differ from the
    id order), the id breaking ties (one run archives its sessions at one time), and a page's `before` continues
    exactly after its last record."""
    from datetime import timedelta

    older, tied_low, tied_high = archives[2], archives[0], archives[1]
    SessionArchive.objects.filter(pk=older.pk).update(archived_at=older.archived_at - timedelta(days=1))
    pages, url = [], "/api/v1/archives?limit=1"
    while url:
        response = admin_api.get(url)
        pages.append([a["id"] for a in response.json()])
        url = response["Link"].split(";")[0].strip("<>") if "Link" in response else None
    assert pages == [[tied_high.pk], [tied_low.pk], [older.pk]]


def test_a_restore_refusal_says_what_is_wrong_with_the_file(admin_api, archives, archive_dir):
    """A file cut short (not whole gzip) and a file whose bytes changed are refused with why, in the admin's terms."""
    cut = archive_dir / archives[0].file_name
    cut.write_bytes(cut.read_bytes()[:-8])
    changed = archive_dir / archives[1].file_name
    changed.write_bytes(gzip.compress(gzip.decompress(changed.read_bytes()) + b"\n"))

    short = admin_api.post(f"/api/v1/archives/{archives[0].pk}/restore").json()["error"]["message"]
    assert short.startswith(f"{archives[0].file_name} cannot be read: ") and "end-of-stream" in short
    other = admin_api.post(f"/api/v1/archives/{archives[1].pk}/restore").json()["error"]["message"]
    assert other.startswith(f"{archives[1].file_name} does not match its record (sha256 ")
    assert other.endswith(f", recorded {archives[1].sha256})")
