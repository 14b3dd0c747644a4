"""The ASGI app the browser tests serve with Daphne: compactweb's own, whose startup also starts the in-process
simulator scheduler when COMPACTWEB_RUN_SIMULATOR=1 (as scripts/dev does), so simulated sessions move while a page
watches."""

from compactweb.asgi import application  # noqa: F401  (the served app)
