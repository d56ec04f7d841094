"""Module-level, uniquely named serializers of the quota endpoints."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from quotas.sizes import MAX_SIZE_BYTES
from quotas.values import DIMENSIONS, MAX_COUNT, MAX_CPU_CORES, UNLIMITED_WORD, OverrideValues, parse_override_value


class QuotaLimitsOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField(allow_null=True, help_text="Live sandboxes at once; null: no limit.")
    cpu = serializers.FloatField(allow_null=True, help_text="Cores; null: no limit.")
    memory = serializers.IntegerField(allow_null=True, help_text="Bytes; null: no limit.")
    disk = serializers.IntegerField(allow_null=True, help_text="Bytes; null: no limit.")


class MyLiveSandboxOutputSerializer(serializers.Serializer):
    ordinal = serializers.IntegerField()
    item = serializers.CharField(help_text="The item's id.")
    slug = serializers.CharField(help_text="The item's app.")
    title = serializers.CharField()
    url = serializers.CharField()
    cores = serializers.FloatField(allow_null=True)
    memory = serializers.IntegerField(allow_null=True)
    charges_cost = serializers.BooleanField(help_text="Whether cpu and memory count towards the per-user totals.")
    opened_at = serializers.DateTimeField()
    last_used_at = serializers.DateTimeField()
    host = serializers.CharField(help_text="The sandbox host it runs on (address:port); blank on the local backend.")


class MyDiskItemOutputSerializer(serializers.Serializer):
    item = serializers.CharField(help_text="The item's id.")
    slug = serializers.CharField(help_text="The item's app.")
    title = serializers.CharField()
    url = serializers.CharField()
    bytes = serializers.IntegerField()
    measured_at = serializers.DateTimeField()


class MyHandoverOutputSerializer(serializers.Serializer):
    item_id = serializers.CharField()
    app_slug = serializers.CharField()
    title = serializers.CharField()
    requested_by = serializers.CharField(help_text="Who asked you to pay for the item.")
    requested_at = serializers.DateTimeField(allow_null=True)


class MyPaidItemOutputSerializer(serializers.Serializer):
    item_id = serializers.CharField()
    app_slug = serializers.CharField()
    title = serializers.CharField()
    created_by = serializers.CharField(help_text="Who created the item, and pays again once you hand the bill back.")
    url = serializers.CharField(help_text="Its page, where you close its sandbox and delete or shrink its files.")
    named_by = serializers.CharField(allow_blank=True, help_text="Who made you pay: staff, or whom you accepted.")
    named_at = serializers.DateTimeField(allow_null=True)
    assigned = serializers.BooleanField(help_text="True when staff assigned you the bill without asking you.")


class MyResourcesOutputSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    limits = QuotaLimitsOutputSerializer()
    sandboxes_in_use = serializers.IntegerField(source="usage.count")
    cpu_in_use = serializers.FloatField(source="usage.cpu")
    memory_in_use = serializers.IntegerField(source="usage.memory")
    live = MyLiveSandboxOutputSerializer(many=True)
    disk_in_use = serializers.IntegerField(help_text="Sum of the last measurements (approximate).")
    disk_tracked = serializers.BooleanField(help_text="Whether a per-user disk limit applies, so disk is measured.")
    disk = MyDiskItemOutputSerializer(many=True)
    handovers = MyHandoverOutputSerializer(
        many=True,
        help_text="Items you are asked to pay for; answer at /me/resources/handovers/<item_id>/accept|decline.",
    )
    paying_for = MyPaidItemOutputSerializer(
        many=True,
        help_text="Items someone else created that you pay for; hand one back at "
        "/me/resources/handovers/<item_id>/return.",
    )


class OverrideValueField(serializers.JSONField):
    """One dimension of an override as a client writes it: unlimited (stored 0) as "max", so a GET
    body can be PUT back."""

    def to_representation(self, value: Any) -> Any:
        return UNLIMITED_WORD if value == 0 else value


class UserResourceOverrideValuesSerializer(serializers.Serializer):
    count = OverrideValueField(allow_null=True, help_text='null: site default; "max": unlimited.')
    cpu = OverrideValueField(allow_null=True, help_text='null: site default; "max": unlimited.')
    memory = OverrideValueField(allow_null=True, help_text='Bytes; null: site default; "max": unlimited.')
    disk = OverrideValueField(allow_null=True, help_text='Bytes; null: site default; "max": unlimited.')


class UserResourceOverrideOutputSerializer(UserResourceOverrideValuesSerializer):
    user_id = serializers.CharField()
    updated_by = serializers.CharField()
    updated_at = serializers.DateTimeField()


class UserResourceListOutputSerializer(serializers.Serializer):
    defaults = QuotaLimitsOutputSerializer()
    overrides = UserResourceOverrideOutputSerializer(many=True)


class UserResourceDetailOutputSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    override = UserResourceOverrideValuesSerializer(allow_null=True)
    effective = QuotaLimitsOutputSerializer()
    defaults = QuotaLimitsOutputSerializer()


# What `parse_override_value` takes, as the document says it and as these fields enforce it: a JSON
# number within the dimension's bounds, or a string holding one (sizes with a K/M/G/T unit), "max"
# in any case, or blank (the default). A string the pattern forbids is refused before it is parsed,
# so the server takes nothing the document does not offer.
_UNLIMITED_TEXT = "[Mm][Aa][Xx]"
_COUNT_TEXT = "[0-9]{1,9}"
_CORES_TEXT = "[0-9]{1,6}(\\.[0-9]{1,6})?"
# Six digits keep any unit (up to T) under the largest size.
_SIZE_TEXT = "[0-9]{1,6}\\s*[KkMmGgTt]?([Ii]?[Bb])?"


def _text_pattern(text: str) -> str:
    return f"^\\s*({text}|{_UNLIMITED_TEXT})?\\s*$"


def _override_schema(number: dict[str, Any], text: str) -> dict[str, Any]:
    # null as a member of its own: OpenAPI 3.0 counts `nullable` only beside a `type`.
    null = {"type": "object", "nullable": True, "enum": [None]}
    return {"anyOf": [number, {"type": "string", "pattern": _text_pattern(text)}, null]}


class _OverrideField(serializers.JSONField):
    text = ""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and not re.fullmatch(_text_pattern(self.text), data):
            raise serializers.ValidationError(f"Not a value this field takes: {self.help_text}")
        return super().to_internal_value(data)


@extend_schema_field(_override_schema({"type": "integer", "minimum": 0, "maximum": MAX_COUNT}, _COUNT_TEXT))
class _CountOverrideField(_OverrideField):
    text = _COUNT_TEXT


@extend_schema_field(_override_schema({"type": "number", "minimum": 0, "maximum": MAX_CPU_CORES}, _CORES_TEXT))
class _CoresOverrideField(_OverrideField):
    text = _CORES_TEXT


@extend_schema_field(_override_schema({"type": "integer", "minimum": 0, "maximum": MAX_SIZE_BYTES}, _SIZE_TEXT))
class _SizeOverrideField(_OverrideField):
    text = _SIZE_TEXT


class UserResourceOverrideInputSerializer(serializers.Serializer):
    """PUT body: each of count, cpu, memory, disk optional or null (the site default applies).

    count and cpu: a number, 0 or null for the site default, "max" for unlimited; memory and
    disk: a size string ("512M", "10G") or bytes, "max" or 0 for unlimited.
    """

    unknown_fields_refused = True  # the document says so (collab.schema.WorkspaceAutoSchema)

    count = _CountOverrideField(required=False, allow_null=True, help_text='Whole number, "max" or null.')
    cpu = _CoresOverrideField(required=False, allow_null=True, help_text='Cores, "max" or null.')
    memory = _SizeOverrideField(required=False, allow_null=True, help_text='Size string, "max" or null.')
    disk = _SizeOverrideField(required=False, allow_null=True, help_text='Size string, "max" or null.')

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and (unknown := sorted(set(data) - set(DIMENSIONS))):
            raise serializers.ValidationError({name: ["Not a known field."] for name in unknown})
        return super().to_internal_value(data)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        errors: dict[str, list[str]] = {}
        parsed: dict[str, Any] = {}
        for name in DIMENSIONS:
            try:
                parsed[name] = parse_override_value(name, attrs.get(name))
            except ValueError as exc:
                errors[name] = [str(exc)]
        if errors:
            raise serializers.ValidationError(errors)
        return {"values": OverrideValues(**parsed)}
