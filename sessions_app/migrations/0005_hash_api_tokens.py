"""API tokens move from DRF's plain-text authtoken table to django-rest-knox's hashed one (issue 14).

Existing tokens keep working: each key is stored as knox stores a token it issued (its SHA-512 digest and first 15
characters), then the plain-text table is dropped, so no database copy holds a usable token any more.
"""

from datetime import UTC, datetime

from django.db import migrations
from django.utils.dateparse import parse_datetime

PLAIN_TABLE = "authtoken_token"


def hash_plain_tokens(apps, schema_editor):
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS

    connection = schema_editor.connection
    if PLAIN_TABLE not in connection.introspection.table_names():
        return
    AuthToken = apps.get_model("knox", "AuthToken")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {PLAIN_TABLE}")
        rows = cursor.fetchall()
    for key, user_id, created in rows:
        # SQLite's raw cursor gives the stored UTC time as a naive value (or its text); PostgreSQL an aware one.
        if isinstance(created, str):
            created = parse_datetime(created)
        if isinstance(created, datetime) and created.tzinfo is None:
            created = created.replace(tzinfo=UTC)
        token = AuthToken(digest=hash_token(key), token_key=key[: CONSTANTS.TOKEN_KEY_LENGTH], user_id=user_id,
                          expiry=None)
        token.save(force_insert=True)
        AuthToken.objects.filter(pk=token.pk).update(created=created)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {PLAIN_TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0004_session_lease_lineage_simulator_run"),
        ("knox", "0009_extend_authtoken_field"),
    ]

    operations = [migrations.RunPython(hash_plain_tokens, migrations.RunPython.noop)]
