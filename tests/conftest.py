"""Shared fixtures: users per role with API clients, an embedded provider and a policy, a session factory, and the
service fixtures (PostgreSQL / Redis) that skip outside CI and fail inside it."""

from __future__ import annotations

import gc
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.flush_guard import wrap_test_flush

# Django's flush between transactional tests empties every table; the rollout triggers refuse that unless the
# test runner's reset is allowed explicitly.
wrap_test_flush()

DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/compactweb"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

# What makes a test touch a service, read from what it asks for (never from a list of tests): a database fixture
# or mark, a service fixture, or the channel layer (Redis in the PostgreSQL + Redis pass; the check in
# `_fresh_channel_layer` keeps that mark honest). `--database-tests-only` keeps these and drops the rest, which
# never open a connection and so gain nothing from a second database (scripts/test gives it to that pass).
SERVICE_FIXTURES = frozenset({
    "db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "django_db_setup",
    "live_server", "redis_url", "postgres_url",
})
SERVICE_MARKS = ("django_db", "services", "channel_layer")


def touches_a_service(item: pytest.Item) -> bool:
    return bool(SERVICE_FIXTURES & set(getattr(item, "fixturenames", ()))) or any(
        item.get_closest_marker(mark) for mark in SERVICE_MARKS)


def asks_for_postgresql(item: pytest.Item) -> bool:
    return "postgres_url" in getattr(item, "fixturenames", ())


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--database-tests-only", action="store_true",
        help="run only the tests that touch a database, Redis or PostgreSQL (see tests/conftest.py)")
    parser.addoption(
        "--postgresql-tests-elsewhere", action="store_true",
        help="leave out the tests that ask for PostgreSQL itself (the postgres_url fixture): another pass runs them")
    parser.addoption(
        "--scale-out-tests", choices=("only", "elsewhere"),
        help="only: collect tests/scale_out alone; elsewhere: leave it out (scripts/test runs it as a pass of its own)")


# The scale-out tests start real process sets and mostly wait on them: scripts/test runs them as a pass of their own,
# in a lane of their own, beside the PostgreSQL + Redis pass (docs/testing.md).
SCALE_OUT_DIR = Path(__file__).resolve().parent / "scale_out"


def in_scale_out(path: Path) -> bool:
    path = path.resolve()
    return path == SCALE_OUT_DIR or SCALE_OUT_DIR in path.parents


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """`--scale-out-tests` splits by directory before anything is imported: the pass that runs tests/scale_out alone
    does not import (collect) the rest of the suite, and the other pass does not import tests/scale_out.
    pytest_collection_modifyitems applies the same split to the paths named on the command line."""
    wanted = config.getoption("--scale-out-tests")
    if wanted is None:
        return None
    if wanted == "elsewhere":
        return True if in_scale_out(collection_path) else None
    # only: keep tests/scale_out and the directories on the way to it
    return None if in_scale_out(collection_path) or collection_path.resolve() in SCALE_OUT_DIR.parents else True


def pytest_configure(config: pytest.Config) -> None:
    # No cyclic collection while the run imports Django, the app and every test module: all of it lives to the end.
    gc.disable()


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection built (modules, Django's apps, the test items) is frozen out of the collector's reach, as the
    # app's own processes freeze their start-up (compactweb/startup_gc.py): otherwise every older-generation
    # collection of the run walked it again. In a measured slice of the suite (234 tests) the collector's CPU fell
    # from 2.8-3.0 s to 1.7-1.8 s of the process's ~25 s (docs/benchmarks.md, "Four lanes").
    gc.freeze()
    gc.enable()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = []
    if "nightly" not in (config.getoption("markexpr") or ""):
        # The long scale-out runs are scripts/nightly scale's (`-m nightly`): a push's run leaves them out.
        keep.append(lambda item: item.get_closest_marker("nightly") is None)
    if config.getoption("--database-tests-only"):
        keep.append(touches_a_service)
    if config.getoption("--postgresql-tests-elsewhere"):
        keep.append(lambda item: not asks_for_postgresql(item))
    scale_out = config.getoption("--scale-out-tests")
    if scale_out:  # paths given on the command line are collected whatever pytest_ignore_collect says
        keep.append(lambda item: in_scale_out(Path(item.path)) == (scale_out == "only"))
    kept = [item for item in items if all(wanted(item) for wanted in keep)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=0.5):
            return True
    except OSError:
        return False


def require_service(name: str, url: str | None, default_port: int, variable: str = "") -> str:
    """Return `url` if the service answers; otherwise skip with the reason, or fail when CI is set. With no `url`
    (its variable unset) the default on 127.0.0.1 is used under CI only: outside CI a test never silently uses
    whatever answers there (another checkout's database, say), it skips and names the variable to set."""
    if not url:
        if not os.environ.get("CI"):
            pytest.skip(f"{name} not configured: set {variable or 'its URL'} to run this test (or run .ci/run)")
        url = DEFAULT_REDIS_URL if default_port == 6379 else DEFAULT_POSTGRES_URL
    if _reachable(url, default_port):
        return url
    message = f"{name} is not reachable at {urlparse(url).hostname}:{urlparse(url).port or default_port}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} and CI is set: service-backed tests must run in CI")
    pytest.skip(f"{message} (service-backed test skipped; start it or run .ci/run)")


# A test connection that waits on a lock, or a thread that leaves a transaction open, must not stall the run: the
# wait errors and the stray transaction is ended by the server, so the teardown's flush (tests/flush_guard.py) goes
# through.
POSTGRES_TEST_OPTIONS = "-c lock_timeout=60s -c idle_in_transaction_session_timeout=60s"


# scripts/nightly mutation migrates one SQLite database per room before mutmut starts, and names it here: each
# mutant's pytest run starts from a copy of it instead of migrating (most of a mutant's run, on 2 cores).
MUTATION_TEMPLATE_DB = os.environ.get("COMPACTWEB_MUTATION_TEMPLATE_DB")


def _mutation_copies_the_template() -> bool:
    return "MUTANT_UNDER_TEST" in os.environ and bool(MUTATION_TEMPLATE_DB)


@pytest.fixture(scope="session")
def django_db_keepdb(request) -> bool:
    """pytest-django's --reuse-db, and under mutmut with a migrated template: the copy is already migrated."""
    return bool(request.config.getvalue("reuse_db")) or _mutation_copies_the_template()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    import shutil

    from django.db import connections

    copies = []
    if "MUTANT_UNDER_TEST" in os.environ:
        # mutmut runs pytest again in processes forked from one that already made and dropped a test database:
        # each run gets a SQLite file of its own, and drops the connections it inherited.
        connections.close_all()
    for alias in connections:
        settings_dict = connections[alias].settings_dict
        if "MUTANT_UNDER_TEST" in os.environ and settings_dict["ENGINE"].endswith("sqlite3"):
            test = settings_dict.setdefault("TEST", {})
            test["NAME"] = f"{test.get('NAME') or 'test.sqlite3'}.{os.getpid()}"
            if _mutation_copies_the_template() and test["NAME"] not in copies:
                shutil.copyfile(MUTATION_TEMPLATE_DB, test["NAME"])
                copies.append(test["NAME"])
        if settings_dict["ENGINE"].endswith("postgresql"):
            options = settings_dict.setdefault("OPTIONS", {})
            options["options"] = f"{options.get('options', '')} {POSTGRES_TEST_OPTIONS}".strip()
    yield
    for name in copies:  # kept by keepdb: removed here, after pytest-django's teardown closed it
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(name + suffix):
                os.unlink(name + suffix)


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """PBKDF2 costs ~0.3 s per user; tests need logins, not brute-force resistance."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _test_hook_modules(settings):
    """Tests define their callable hooks in test modules: allow `tests.` next to the deployment's prefixes."""
    settings.COMPACTWEB_HOOK_CALLABLE_PREFIXES = [*settings.COMPACTWEB_HOOK_CALLABLE_PREFIXES, "tests."]


@pytest.fixture(autouse=True)
def _loopback_test_servers(settings):
    """The tests' scripted providers and webhooks listen on 127.0.0.1. A deployment refuses loopback and private
    targets unless it lists them (issue 27); the tests list loopback explicitly, as a deployment with a model
    server on the same machine would. Tests of the refusal itself set their own list."""
    settings.COMPACTWEB_OUTBOUND_ALLOW = ["127.0.0.1", "localhost", "::1"]


@pytest.fixture(autouse=True)
def _empty_cache():
    """API throttling counts requests in Django's cache, keyed by user id or address: start every test at zero."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _empty_turn_caches():
    """The turns' per-process caches are keyed by session id and `last_seq`, which a test's rolled-back rows give
    to the next test's sessions again: start every test with them empty, as a new process would be."""
    from sessions_app.turns.caches import history_cache, idle_sessions, turn_context_cache

    for cache in (history_cache, turn_context_cache, idle_sessions):
        cache.clear()


@pytest.fixture(autouse=True, scope="session")
def _no_background_followed_writes_watcher():
    """The dashboard starts its followed-writes watcher with the first page socket; tests that open sockets in
    this process would leave it polling for the rest of the run, publishing other tests' writes into their channel
    layers. Tests run `follow_live.watch` themselves; the one that checks the start resets this."""
    from sessions_app.transfer import follow_live

    follow_live._started = threading.Event()
    yield
    follow_live._started.set()


@pytest.fixture(autouse=True)
def _fresh_channel_layer(request):
    """A channel layer per test: channels-redis binds its locks to the event loop that first used the layer, and
    every async test runs on a loop of its own. A test that built one must say it touches a service, or the
    PostgreSQL + Redis pass (which keeps only those) would never run it on Redis."""
    from channels.layers import channel_layers

    built = []
    make_backend = channel_layers.make_backend

    def recorded(name):  # a test's own fixture may clear the backends before this one looks at them
        built.append(name)
        return make_backend(name)

    channel_layers.backends.clear()
    channel_layers.make_backend = recorded
    yield
    del channel_layers.make_backend  # the class's own again
    channel_layers.backends.clear()
    if built and not touches_a_service(request.node):
        pytest.fail("this test used the channel layer but asks for no database: mark it "
                    "@pytest.mark.channel_layer so the PostgreSQL + Redis pass runs it on Redis too")


def configured_redis_url() -> str | None:
    """The Redis a test asks for by fixture: COMPACTWEB_TEST_REDIS_URL (scripts/test gives the embedded pass its own
    database there, as it runs beside the PostgreSQL + Redis pass), else REDIS_URL."""
    return os.environ.get("COMPACTWEB_TEST_REDIS_URL") or os.environ.get("REDIS_URL")


def configured_postgres_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith("postgres") else os.environ.get("COMPACTWEB_TEST_POSTGRES_URL")


@pytest.fixture
def redis_url() -> str:
    return require_service("Redis", configured_redis_url(), 6379, "REDIS_URL")


@pytest.fixture(scope="session")  # session-wide so that module-wide fixtures (a scratch database) can ask for it
def postgres_url() -> str:
    return require_service("PostgreSQL", configured_postgres_url(), 5432, "DATABASE_URL")


@pytest.fixture
def make_user(db) -> Callable:
    """make_user(role=None, username=None, password=None) → a user in that role's group (None = no role)."""
    from django.contrib.auth.models import Group, User

    counter = iter(range(1, 10_000))

    def make(role: str | None = None, username: str | None = None, password: str | None = None) -> User:
        user = User.objects.create_user(
            username=username or f"{role or 'norole'}-{next(counter)}", password=password or "pw-for-tests-only"
        )
        if role:
            user.groups.add(Group.objects.get(name=role))
        return user

    return make


@pytest.fixture
def operator_user(make_user):
    return make_user("operator")


@pytest.fixture
def support_user(make_user):
    return make_user("support")


@pytest.fixture
def admin_user_role(make_user):
    """A user in the admin group (pytest-django's own `admin_user` is a superuser)."""
    return make_user("admin")


@pytest.fixture
def api_client_for(db) -> Callable:
    """api_client_for(user_or_None) → a DRF APIClient authenticated with the user's API token."""
    from rest_framework.test import APIClient

    from compactweb.api_tokens import issue_token

    tokens: dict[int, str] = {}  # one token per user, as before (tokens are stored hashed, so keep the plain one)

    def make(user=None) -> APIClient:
        client = APIClient()
        if user is not None:
            if user.pk not in tokens:
                tokens[user.pk] = issue_token(user=user)
            client.credentials(HTTP_AUTHORIZATION=f"Token {tokens[user.pk]}")
        return client

    return make


@pytest.fixture
def anon_api(api_client_for):
    return api_client_for(None)


@pytest.fixture
def norole_api(api_client_for, make_user):
    return api_client_for(make_user(None))


@pytest.fixture
def operator_api(api_client_for, operator_user):
    return api_client_for(operator_user)


@pytest.fixture
def support_api(api_client_for, support_user):
    return api_client_for(support_user)


@pytest.fixture
def admin_api(api_client_for, admin_user_role):
    return api_client_for(admin_user_role)


@pytest.fixture
def provider(db):
    """The embedded simulated provider with a small window so compactions happen quickly."""
    from compaction_app.models import Provider

    return Provider.objects.create(
        name="embedded-test", base_url=Provider.EMBEDDED, model="sim-1", context_window=32000,
        remote_compaction=Provider.RemoteCompaction.V2,
    )


@pytest.fixture
def policy(db):
    from compaction_app.models import CompactionPolicy

    return CompactionPolicy.objects.create(name="test-policy")


@pytest.fixture
def make_session(provider, policy) -> Callable:
    """make_session(title=..., items=[...], initial_context=[...], **kwargs) through the real service."""
    from sessions_app.rollout.services import do_create_session

    def make(**kwargs):
        kwargs.setdefault("title", "test session")
        kwargs.setdefault("provider", provider)
        kwargs.setdefault("policy", policy)
        return do_create_session(**kwargs)

    return make


@pytest.fixture
def session(make_session):
    return make_session()


def user_text(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant_text(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


@pytest.fixture
def items_factory():
    """Helpers building Responses items: items_factory.user(text), .assistant(text)."""

    class Items:
        user = staticmethod(user_text)
        assistant = staticmethod(assistant_text)

    return Items


@pytest.fixture
def no_engine_sleeps(settings):
    """The retry backoff of the engine and the provider client waits no real time (the one setting that scales it)."""
    settings.COMPACTWEB_RETRY_BACKOFF_SCALE = 0


@pytest.fixture
def served_script(no_engine_sleeps):
    """A ScriptedProvider served on 127.0.0.1 (its `base_url` set); the engine's backoff sleeps are skipped."""
    from tests.fakes.scripted_provider import ScriptedProvider

    provider = ScriptedProvider()
    with provider.serve() as base_url:
        provider.base_url = base_url
        yield provider


@pytest.fixture
def scripted_sessions(operator_api, served_script):
    """ScriptedSessions: API sessions on the served scripted provider (tests/fakes/scripted_api.py)."""
    from tests.fakes.scripted_api import ScriptedSessions

    return ScriptedSessions(operator_api, served_script)
