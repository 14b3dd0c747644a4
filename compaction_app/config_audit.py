"""Policy and provider changes go to the audit log, whether made in the Django admin or through the API (design:
the audit log shows every policy change with who and when)."""

from __future__ import annotations

from compaction_app.audit import field_values, plain_value, record_config_change


class AuditedAdminMixin:
    """For a ModelAdmin: after a save, record the changed fields with their old and new values."""

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        new_values = {name: form.cleaned_data.get(name) for name in form.changed_data}
        record_config_change(
            actor=request.user, instance=obj, changed_fields=form.changed_data, created=not change,
            previous=dict(form.initial) if change else None, new_values=new_values, via="admin",
        )


class AuditedApiMixin:
    """For a DRF create/update view: record what a POST or PATCH changed."""

    def perform_create(self, serializer):
        super().perform_create(serializer)
        record_config_change(
            actor=self.request.user, instance=serializer.instance, changed_fields=list(serializer.validated_data),
            created=True, new_values=dict(serializer.validated_data), via="api",
        )

    def perform_update(self, serializer):
        previous = field_values(serializer.instance)
        super().perform_update(serializer)
        changed = [name for name, value in serializer.validated_data.items()
                   if name not in previous or previous[name] != plain_value(value)]
        record_config_change(
            actor=self.request.user, instance=serializer.instance, changed_fields=changed, created=False,
            previous=previous, new_values=dict(serializer.validated_data), via="api",
        )
