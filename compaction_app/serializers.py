"""JSON shapes of providers and policies (design: JSON API contract). API keys are never accepted or returned."""

from __future__ import annotations

from rest_framework import serializers

from compaction_app.models import CompactionPolicy, Hook, Prompt, Provider
from compaction_app.validators import provider_key_problems

SECRET_FIELDS = ("api_key", "key", "secret", "token", "password")


class ProviderSerializer(serializers.ModelSerializer):
    class Meta:
        model = Provider
        fields = [
            "id", "name", "base_url", "wire_api", "model", "fallback_model", "context_window",
            "effective_context_window_percent", "usable_context_window", "remote_compaction", "api_key_env",
            "header_envs", "encoding", "connect_timeout", "read_timeout", "stream_max_retries", "request_max_retries",
            "supports_reasoning", "supports_images", "comp_hash", "created", "updated",
        ]
        read_only_fields = ["id", "usable_context_window", "created", "updated"]

    usable_context_window = serializers.IntegerField(read_only=True)

    def to_internal_value(self, data):
        if isinstance(data, dict):
            secrets = [k for k in SECRET_FIELDS if k in data]
            if secrets:
                raise serializers.ValidationError(
                    {secrets[0]: "API keys are never accepted: put the key in an environment variable and set "
                     "api_key_env to that variable's name."}
                )
        return super().to_internal_value(data)

    def validate(self, attrs):
        # Issue 27: each secret variable is bound to base URLs (compaction_app.validators, as Provider.clean).
        def current(field, default):
            return attrs.get(field, getattr(self.instance, field, default))

        problems = provider_key_problems(base_url=current("base_url", ""), api_key_env=current("api_key_env", ""),
                                         header_envs=current("header_envs", {}))
        if problems:
            raise serializers.ValidationError(problems)
        return attrs



class CompactionPolicySerializer(serializers.ModelSerializer):
    prompt = serializers.PrimaryKeyRelatedField(queryset=Prompt.objects.all(), allow_null=True, required=False)
    hooks = serializers.PrimaryKeyRelatedField(queryset=Hook.objects.all(), many=True, required=False)

    class Meta:
        model = CompactionPolicy
        fields = [
            "id", "name", "auto_compact_token_limit", "auto_compact_scope", "token_counter", "strategy",
            "remote_compaction_v2", "token_budget", "compact_prompt", "prompt", "user_message_budget",
            "retained_message_budget", "stream_max_retries", "request_max_retries", "fallback_model", "pin_budget_tokens", "hooks",
            "created", "updated",
        ]
        read_only_fields = ["id", "created", "updated"]

    def validate(self, attrs):
        compact_prompt = attrs.get("compact_prompt", getattr(self.instance, "compact_prompt", ""))
        prompt = attrs.get("prompt", getattr(self.instance, "prompt", None))
        if (compact_prompt or "").strip() and prompt is not None:
            raise serializers.ValidationError(
                {"prompt": "Set either compact_prompt or prompt, not both (spec §12: setting both is an error)."}
            )
        return attrs
