"""ASGI entry point: Django for HTTP, Channels for websockets, the embedded simulated model under /sim/."""

import os

from compactweb.startup_gc import pause_collector

pause_collector()  # until Django's apps are ready: see compactweb/startup_gc.py
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "compactweb.settings")

from compactweb.request_threads import get_asgi_application  # noqa: E402

django_asgi = get_asgi_application()

# Under Daphne: refuse an oversized body before Twisted reads it, and keep Twisted's form parsing off the reactor.
from compactweb import daphne_body  # noqa: E402

daphne_body.install()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from compactweb.routing import http_router, sim_websocket_router, websocket_urlpatterns  # noqa: E402
from compactweb.ws_auth import DeferredAuthMiddlewareStack  # noqa: E402
from compactweb.ws_origin import ExactOriginValidator  # noqa: E402

# A follower in another process (`manage.py follow_rollouts`) on the in-memory channel layer: the dashboard reads
# its writes from the database and publishes them, so pages stay live (issue 30); from the first page socket on.
from sessions_app.transfer.follow_live import StartOnFirstSocket  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": http_router(django_asgi),
        "websocket": sim_websocket_router(
            StartOnFirstSocket(ExactOriginValidator(DeferredAuthMiddlewareStack(URLRouter(websocket_urlpatterns))))
        ),
    }
)

# Codex interop: follow a Codex sessions folder inside the dashboard when COMPACTWEB_FOLLOW_ROLLOUTS_DIR is set.
from sessions_app.transfer.follow import start_from_settings  # noqa: E402

start_from_settings()

# The embedded simulator: the dashboard's ASGI startup runs the scheduler when COMPACTWEB_RUN_SIMULATOR=1 (scripts/dev
# sets it); `manage.py simulate --scheduler` runs it on its own. Not from AppConfig.ready, which also runs under
# migrate, shell and every Celery worker.
from sessions_app.fleet.scheduler import start_from_environment  # noqa: E402

start_from_environment()


# Start-up is over: what it built lives as long as the process and need not be walked by every full collection.
from compactweb.startup_gc import freeze_startup_objects  # noqa: E402

freeze_startup_objects()
