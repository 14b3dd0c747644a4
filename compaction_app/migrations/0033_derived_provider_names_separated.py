"""Derived providers (a scenario's or an import's other model or window) are named with the window written as the
pages write numbers (`embedded · gpt-5.1-codex · 128,000`, issue 47 item 7); rows named before are renamed. A
name someone gave by hand (anything but the old derived form) is left as it is."""

import django.core.validators
from django.db import migrations, models


def rename(apps, schema_editor):
    Provider = apps.get_model("compaction_app", "Provider")
    taken = set(Provider.objects.values_list("name", flat=True))
    for row in Provider.objects.filter(derived_from__isnull=False).select_related("derived_from"):
        old = f"{row.derived_from.name} · {row.model} · {row.context_window}"[:100]
        new = f"{row.derived_from.name} · {row.model} · {row.context_window:,}"[:100]
        if row.name == old and new != old and new not in taken:
            taken.discard(old)
            taken.add(new)
            row.name = new
            row.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [("compaction_app", "0032_compaction_extra_instructions")]

    operations = [
        migrations.RunPython(rename, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="provider",
            name="context_window",
            field=models.PositiveIntegerField(
                default=272000,
                help_text="The model's context window in tokens (Codex: model_context_window; unknown models "
                          "272,000, §2.2).",
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
    ]
