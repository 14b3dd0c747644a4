"""The ASGI app the browser tests serve with Daphne: compactweb's own, plus the in-process simulator scheduler
(started when COMPACTWEB_RUN_SIMULATOR=1, as scripts/dev does), so simulated sessions move while a page watches."""

from compactweb.asgi import application  # noqa: F401  (the served app)
from sessions_app.fleet.scheduler import start_from_environment

start_from_environment()
