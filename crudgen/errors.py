"""Errors crudgen raises; each carries its HTTP status and `error` code so views render them uniformly."""

from __future__ import annotations

from typing import Any


class CrudError(Exception):
    status_code = 400
    code = "error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class NotFoundError(CrudError):
    status_code = 404
    code = "not_found"


class ResourceDeletedError(CrudError):
    status_code = 410
    code = "resource_deleted"


class ValidationFailed(CrudError):
    """The body does not fit the model; `fields` maps each offending field to its message."""

    status_code = 422
    code = "validation_error"

    def __init__(self, fields: dict[str, str], detail: str | None = None) -> None:
        summary = detail or "; ".join(f"{name}: {message}" for name, message in fields.items())
        super().__init__(summary, fields=fields)
        self.fields = fields


class InvalidPatch(CrudError):
    status_code = 422
    code = "invalid_patch"


class RevisionConflict(CrudError):
    status_code = 412
    code = "revision_conflict"


class NotDeletedError(CrudError):
    """A restore that states the resource is deleted (`is_deleted=true`) found it live."""

    status_code = 409
    code = "not_deleted"


class DuplicateResource(CrudError):
    status_code = 409
    code = "duplicate_resource"
