"""Where a failure was raised, whatever order its stack is printed in, and a failed request in a server's log
(issue 46, round seven). Python's traceback lists the innermost frame last; Java, JavaScript and Go list it first,
and a frame of the runtime's own library is not where the program went wrong. An access-log line that answered 5xx
is a failure, proved by its request and status (in digits or in words), not by the client's address or agent."""

from __future__ import annotations

import pytest

from compaction_app.engine.retention.facts import FactKind, failure_location
from tests.compaction_app.engine.retention.test_round_four_rules import kept
from tests.compaction_app.engine.retention.test_stated_values import output

JAVA = ("Exception in thread \"main\" java.lang.NullPointerException: account is null\n"
        "\tat java.base/java.util.Objects.requireNonNull(Objects.java:233)\n"
        "\tat com.shop.billing.Invoice.total(Invoice.java:77)\n"
        "\tat com.shop.billing.Main.main(Main.java:12)")
GO = ("panic: assignment to entry in nil map\n\ngoroutine 1 [running]:\n"
      "example.com/shop/cache.(*Store).Put(...)\n\t/srv/shop/cache/store.go:54 +0x3c\n"
      "main.main()\n\t/srv/shop/cmd/main.go:20 +0x88\nexit status 2")
NODE = ("TypeError: Cannot read properties of undefined (reading 'id')\n"
        "    at toRow (/app/src/export.js:31:17)\n    at Array.map (<anonymous>)\n"
        "    at processTicksAndRejections (node:internal/process/task_queues:95:5)")
PYTHON = ("Traceback (most recent call last):\n  File \"app/main.py\", line 9, in <module>\n    run()\n"
          "  File \"app/jobs.py\", line 41, in run\n    total = 1 / count\nZeroDivisionError: division by zero")


@pytest.mark.parametrize(("body", "place"), [
    (JAVA, "Invoice.java:77"), (GO, "/srv/shop/cache/store.go:54"), (NODE, "/app/src/export.js:31"),
    (PYTHON, "app/jobs.py:41"),
])
def test_the_innermost_frame_of_the_programs_own_code_is_the_place(body, place):
    found = failure_location(f"Exit code: 1\nOutput:\n{body}", 1)
    assert found is not None and found[1] == place


ACCESS = output("grep '\" 503 ' /var/log/nginx/access.log | tail -n 1",
                "10.1.2.3 - - [02/Dec/2026:08:00:01 +0000] \"PUT /api/carts/88/items HTTP/1.1\" 503 97 \"-\" "
                "\"curl/8.5.0\" rt=0.004")


@pytest.mark.parametrize(("claim", "held"), [
    ("- PUT /api/carts/88/items answers 503", True),
    ("- /api/carts/88/items fails with Service Unavailable", True),
    ("- PUT /api/carts/88/items answers 502", False),
    ("- the cart API had some errors", False),
])
def test_a_failed_request_in_an_access_log_is_kept_by_its_target_and_status(claim, held):
    assert kept(ACCESS, claim, FactKind.ERROR, "/api/carts/88/items") is held
