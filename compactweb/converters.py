"""The `id` path converter: a row id a database column can hold (issue 27).

Django's `int` converter takes any run of digits, and a lookup of 2**63 or more overflows SQLite's 64-bit integers
inside the driver (OverflowError: a 500) where PostgreSQL answers "no such row". `id` matches 1 to 19 digits of at
most 2**63 - 1, so a larger number is simply a URL that does not resolve: 404 on both databases. Registered on
import; the URLconfs and the websocket routing import it before they use `<id:...>`.
"""

from __future__ import annotations

from django.urls import register_converter

MAX_ID = 2**63 - 1


class RowIdConverter:
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > MAX_ID:
            raise ValueError("larger than a database row id")  # Django: this pattern does not match
        return number

    def to_url(self, value: int) -> str:
        return str(int(value))


register_converter(RowIdConverter, "id")
