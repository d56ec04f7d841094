"""Metadata configuration and the stored records (resource meta, revision) every storage keeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone


@dataclass
class MetadataConfig:
    id_field: str = "id"
    enable_timestamps: bool = False
    created_time_field: str | None = "created_time"
    updated_time_field: str | None = "updated_time"
    enable_user_tracking: bool = False
    created_by_field: str | None = "created_by"
    updated_by_field: str | None = "updated_by"
    get_current_time: Callable[[], datetime] | None = None
    get_current_user: Callable[[], str | None] | None = None

    # The factories take autocrud 0.2's arguments, by keyword only: a positional call meant for
    # either library's order fails loudly instead of naming a field after a function.
    @classmethod
    def with_timestamps(
        cls,
        *,
        created_time_field: str | None = "created_time",
        updated_time_field: str | None = "updated_time",
        get_current_time: Callable[[], datetime] | None = None,
        **kwargs: Any,
    ) -> MetadataConfig:
        return cls(
            enable_timestamps=True,
            created_time_field=created_time_field,
            updated_time_field=updated_time_field,
            get_current_time=get_current_time,
            **kwargs,
        )

    @classmethod
    def with_user_tracking(
        cls,
        *,
        created_by_field: str | None = "created_by",
        updated_by_field: str | None = "updated_by",
        get_current_user: Callable[[], str | None] | None = None,
        **kwargs: Any,
    ) -> MetadataConfig:
        return cls(
            enable_user_tracking=True,
            created_by_field=created_by_field,
            updated_by_field=updated_by_field,
            get_current_user=get_current_user,
            **kwargs,
        )

    @classmethod
    def with_full_tracking(
        cls,
        *,
        get_current_user: Callable[[], str | None] | None = None,
        get_current_time: Callable[[], datetime] | None = None,
        **kwargs: Any,
    ) -> MetadataConfig:
        return cls(
            enable_timestamps=True,
            enable_user_tracking=True,
            get_current_user=get_current_user,
            get_current_time=get_current_time,
            **kwargs,
        )

    def get_metadata_fields(self) -> dict[str, bool]:
        """The metadata fields this configuration fills, each mapped to True (autocrud 0.2's shape):
        the id always, the time fields with timestamps, the user fields with user tracking."""
        names = [self.id_field]
        if self.enable_timestamps:
            names += [self.created_time_field, self.updated_time_field]
        if self.enable_user_tracking:
            names += [self.created_by_field, self.updated_by_field]
        return {name: True for name in names if name}

    def get_create_excluded_fields(self) -> set[str]:
        """Fields a create body leaves to the server: the id, both times and `updated_by`.

        `created_by` is not among them: with no user known, the creator a client names is kept.
        """
        return self._server_filled(keeping=self.created_by_field)

    def get_update_excluded_fields(self) -> set[str]:
        """Fields a replace body leaves to the server: the id, both times and `created_by` (fixed at
        creation). `updated_by` is not among them: with no user known, the one a client names is kept."""
        return self._server_filled(keeping=self.updated_by_field)

    def _server_filled(self, *, keeping: str | None) -> set[str]:
        """The fields this configuration fills, but the user field a body may still give."""
        return {name for name in self.get_metadata_fields() if name != keeping}

    def now(self) -> datetime:
        moment = self.get_current_time() if self.get_current_time else timezone.now()
        if moment.tzinfo is None:
            raise ValueError("get_current_time must return a timezone-aware datetime")
        return moment.astimezone(UTC)


@dataclass
class ResourceMeta:
    """The stored metadata of one resource; times are kept even when the config hides them (for ordering)."""

    resource_id: str
    current_revision_id: str
    is_deleted: bool
    created_time: datetime
    updated_time: datetime
    created_by: str | None
    updated_by: str | None
    revision_count: int = 1
    schema_version: str | None = None

    def to_record(self) -> dict[str, Any]:
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        record["created_time"] = self.created_time.isoformat()
        record["updated_time"] = self.updated_time.isoformat()
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ResourceMeta:
        values = dict(record)
        values["created_time"] = _parse_time(values["created_time"])
        values["updated_time"] = _parse_time(values["updated_time"])
        return cls(**values)

    def evolve(self, **changes: Any) -> ResourceMeta:
        return replace(self, **changes)


@dataclass
class Revision:
    resource_id: str
    revision_id: str
    parent_revision_id: str | None
    number: int
    data: dict[str, Any]
    created_time: datetime
    created_by: str | None
    schema_version: str | None = None

    def to_record(self) -> dict[str, Any]:
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        record["created_time"] = self.created_time.isoformat()
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Revision:
        values = dict(record)
        values["created_time"] = _parse_time(values["created_time"])
        return cls(**values)


def _parse_time(value: str | datetime) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


def meta_view(meta: ResourceMeta, config: MetadataConfig) -> dict[str, Any]:
    """The public shape of metadata: time and user fields only when the config enables them."""
    body: dict[str, Any] = {
        "resource_id": meta.resource_id,
        "current_revision_id": meta.current_revision_id,
        "is_deleted": meta.is_deleted,
        "schema_version": meta.schema_version,
    }
    if config.enable_timestamps:
        body["created_time"] = meta.created_time.isoformat()
        body["updated_time"] = meta.updated_time.isoformat()
    if config.enable_user_tracking:
        body["created_by"] = meta.created_by
        body["updated_by"] = meta.updated_by
    return body


def revision_view(revision: Revision, meta: ResourceMeta, config: MetadataConfig) -> dict[str, Any]:
    body: dict[str, Any] = {
        "resource_id": revision.resource_id,
        "revision_id": revision.revision_id,
        "parent_revision_id": revision.parent_revision_id,
        "schema_version": revision.schema_version,
        "is_current": revision.revision_id == meta.current_revision_id,
    }
    if config.enable_timestamps:
        body["created_time"] = revision.created_time.isoformat()
    if config.enable_user_tracking:
        body["created_by"] = revision.created_by
    return body
