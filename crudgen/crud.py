"""SingleModelCRUD: the revisioned resource service for one model, independent of HTTP."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import msgspec

from crudgen.access import AccessAction, AccessPolicy, Actor, Caller, ListScope
from crudgen.errors import NotDeletedError, NotFoundError, ResourceDeletedError, RevisionConflict
from crudgen.filters import build_filterset, filterable_fields
from crudgen.metadata import MetadataConfig, ResourceMeta, Revision, meta_view, revision_view
from crudgen.schema import ModelAdapter, to_plain
from crudgen.storage.base import Storage, Stored, WriteSession, save_switched
from crudgen.types import DataFilter, ListQueryParams, ListResult
from crudgen.updates import apply_json_patch, apply_update_operations


class SchemaMigration(Protocol):
    """Upgrades data written under an older schema; `migrate` gets the old data as a JSON byte stream."""

    @property
    def schema_version(self) -> str: ...

    def migrate(self, data_stream: io.BytesIO, old_schema_version: str | None) -> Any: ...


def _default_id() -> str:
    return str(uuid.uuid4())


def if_match_allows(header: str | None, current_revision_id: str) -> bool:
    """RFC 9110 If-Match: `*`, or a list of (possibly weak) entity tags naming the current revision."""
    if header is None or header.strip() == "*":
        return True
    tags = [tag.strip().removeprefix("W/").strip('"') for tag in header.split(",")]
    return current_revision_id in tags


class SingleModelCRUD:
    """Create, read, change and list one model's resources, keeping every data change as a revision.

    Each write is decided by a function of the current state that `storage.write` runs, so checks
    (access, If-Match, deleted, identical data) and the write see the same revision; every error is
    raised before `save`, and a storage may run the function again on a fresher state.
    """

    def __init__(
        self,
        model: type,
        storage: Storage,
        resource_name: str,
        id_generator: Callable[[], str] | None = None,
        metadata_config: MetadataConfig | None = None,
        default_values: Mapping[str, Any] | None = None,
        migration: SchemaMigration | None = None,
        access_policy: AccessPolicy | None = None,
        indexed_fields: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.access_policy = access_policy or AccessPolicy()
        self.storage = storage
        self.resource_name = resource_name
        self.id_generator = id_generator or _default_id
        self.metadata_config = metadata_config or MetadataConfig()
        self.adapter = ModelAdapter(model, default_values)
        self.migration = migration
        #: The model's scalar fields with their lookups, and the FilterSet the list routes parse with.
        self.filterable_fields = filterable_fields(model)
        self.filterset = build_filterset(resource_name, self.filterable_fields)
        unfit = sorted(set(indexed_fields) - set(self.filterable_fields))
        if unfit:
            raise ValueError(f"indexed_fields name fields without filters: {', '.join(unfit)}")
        storage.attach(resource_name)
        storage.describe_data(self.filterable_fields, tuple(indexed_fields))

    # -- helpers -------------------------------------------------------------------------------

    @property
    def schema_version(self) -> str | None:
        return self.migration.schema_version if self.migration else None

    def _user(self, user: str | None) -> str | None:
        if user is not None:
            return user
        getter = self.metadata_config.get_current_user
        return getter() if getter else None

    def _upgrade(self, data: dict[str, Any], version: str | None) -> dict[str, Any]:
        if self.migration is None or version == self.migration.schema_version:
            return data
        migrated = self.migration.migrate(io.BytesIO(msgspec.json.encode(data)), version)
        return self.adapter.validate(to_plain(migrated))

    def _migrated(self, stored: Stored) -> Stored:
        """Old-schema data is read in the current shape; the stored row changes only on its next write."""
        if self.migration is None or stored.meta.schema_version == self.schema_version:
            return stored
        data = self._upgrade(stored.data, stored.meta.schema_version)
        return Stored(stored.meta.evolve(schema_version=self.schema_version), data)

    def _with_metadata_fields(
        self, data: Mapping[str, Any], meta: ResourceMeta, current: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Model fields named like metadata carry the server's values; a body cannot forge them.

        With no user known, a user field keeps what the client gave, and a change keeps the
        creator the resource already had (autocrud 0.2), so a model with `created_by: str` can be
        created by a script; the metadata's `created_by` stays None, so no policy or filter on it
        can be fooled.
        """
        config = self.metadata_config
        values: dict[str | None, Any] = {config.id_field: meta.resource_id}
        if config.enable_timestamps:
            values[config.created_time_field] = meta.created_time
            values[config.updated_time_field] = meta.updated_time
        if config.enable_user_tracking:
            for name, user in ((config.created_by_field, meta.created_by), (config.updated_by_field, meta.updated_by)):
                if user is not None:
                    values[name] = user
                elif current is not None and name == config.created_by_field and name in current:
                    values[name] = current[name]
                elif name not in data:
                    values[name] = None
        filled = dict(data)
        for name, value in values.items():
            if name and name in self.adapter.fields:
                filled[name] = to_plain(value)
        return filled

    def _prepare(
        self, data: Any, meta: ResourceMeta, *, full: bool, current: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        body = self.adapter.with_defaults(data) if full and isinstance(data, Mapping) else data
        if isinstance(body, Mapping):
            body = self._with_metadata_fields(body, meta, current)
        return self.adapter.validate(body)

    def caller_for(self, actor: Actor) -> Caller:
        """This model's access policy bound to `actor`: pass it as `caller=` so a call from Python
        (a page, a job off the request path) is decided exactly as a route for that actor is."""
        return Caller(self.access_policy, actor)

    def _read(self, resource_id: str, caller: Caller | None = None, action: AccessAction = AccessAction.READ) -> Stored:
        """Deleted or not; a caller the policy refuses gets the same 404 as for a missing id."""
        stored = self.storage.fetch(resource_id)
        if stored is None:
            raise NotFoundError(f"{self.resource_name} {resource_id} not found")
        if caller is not None:
            caller.authorize(action, stored.meta, self.resource_name)
        return self._migrated(stored)

    # -- writes --------------------------------------------------------------------------------

    def create(self, data: Any, *, user: str | None = None, caller: Caller | None = None) -> dict[str, Any]:
        return meta_view(self.create_meta(data, user=user, caller=caller), self.metadata_config)

    def create_meta(self, data: Any, *, user: str | None = None, caller: Caller | None = None) -> ResourceMeta:
        actor = self._user(user)
        now = self.metadata_config.now()
        resource_id = self.id_generator()
        revision_id = f"{resource_id}:1"
        meta = ResourceMeta(resource_id, revision_id, False, now, now, actor, actor, 1, self.schema_version)
        plain = self._prepare(to_plain(data), meta, full=True)
        if caller is not None:
            caller.check_data(plain)
        revision = Revision(resource_id, revision_id, None, 1, plain, now, actor, self.schema_version)
        self.storage.insert(meta, revision, plain)
        return meta

    def _change(
        self,
        resource_id: str,
        if_match: str | None,
        change: Callable[[WriteSession, Stored], ResourceMeta],
        *,
        action: AccessAction,
        caller: Caller | None,
        allow_deleted: bool = False,
    ) -> ResourceMeta:
        def decide(session: WriteSession | None) -> ResourceMeta:
            if session is None:
                raise NotFoundError(f"{self.resource_name} {resource_id} not found")
            # Access first: a refused caller learns neither the current revision nor a deletion.
            if caller is not None:
                caller.authorize(action, session.current.meta, self.resource_name)
            current = self._migrated(session.current)
            if not if_match_allows(if_match, current.meta.current_revision_id):
                raise RevisionConflict(
                    f"revision {current.meta.current_revision_id} is current; If-Match named another",
                    current_revision_id=current.meta.current_revision_id,
                )
            if current.meta.is_deleted and not allow_deleted:
                raise ResourceDeletedError(f"{self.resource_name} {resource_id} is deleted")
            return change(session, current)

        return self.storage.write(resource_id, decide)

    def _data_shows_update_fields(self) -> bool:
        """Whether the model has fields the server fills with `updated_time`/`updated_by`; if not,
        data built for the new metadata equals data built for the current one (validated once)."""
        config = self.metadata_config
        names = [config.updated_time_field if config.enable_timestamps else None]
        names.append(config.updated_by_field if config.enable_user_tracking else None)
        return any(name is not None and name in self.adapter.fields for name in names)

    def _store_data(
        self,
        session: WriteSession,
        current: Stored,
        build: Callable[[ResourceMeta], dict[str, Any]],
        actor: str | None,
        caller: Caller | None,
    ) -> ResourceMeta:
        unchanged = build(current.meta)
        if unchanged == current.data:
            return current.meta
        now = self.metadata_config.now()
        number = current.meta.revision_count + 1
        meta = current.meta.evolve(
            current_revision_id=f"{current.meta.resource_id}:{number}",
            updated_time=now,
            updated_by=actor,
            revision_count=number,
            schema_version=self.schema_version,
        )
        data = build(meta) if self._data_shows_update_fields() else unchanged
        if caller is not None:
            caller.check_data(data)
        revision = Revision(
            meta.resource_id,
            meta.current_revision_id,
            current.meta.current_revision_id,
            number,
            data,
            now,
            actor,
            self.schema_version,
        )
        session.save(meta, data, revision)
        return meta

    def update_meta(
        self,
        resource_id: str,
        data: Any,
        *,
        user: str | None = None,
        if_match: str | None = None,
        caller: Caller | None = None,
    ) -> ResourceMeta:
        """Replace the data (PUT); data identical to the current revision stores nothing."""
        actor = self._user(user)
        body = to_plain(data)

        def change(session: WriteSession, current: Stored) -> ResourceMeta:
            return self._store_data(
                session, current, lambda meta: self._prepare(body, meta, full=True, current=current.data), actor, caller
            )

        return self._change(resource_id, if_match, change, action=AccessAction.UPDATE, caller=caller)

    def patch_meta(
        self,
        resource_id: str,
        operations: Any,
        *,
        user: str | None = None,
        if_match: str | None = None,
        caller: Caller | None = None,
    ) -> ResourceMeta:
        """Apply RFC 6902 operations; the result is validated against the model before anything is stored."""
        return self._update_from_current(
            resource_id, lambda data: apply_json_patch(data, operations), user, if_match, caller
        )

    def modify_meta(
        self,
        resource_id: str,
        updates: Mapping[str, Any],
        *,
        user: str | None = None,
        if_match: str | None = None,
        caller: Caller | None = None,
    ) -> ResourceMeta:
        """The advanced updater: `{field: UpdateOperation}` (set_value, list_add, list_remove, dict_update)."""
        return self._update_from_current(
            resource_id, lambda data: apply_update_operations(data, updates), user, if_match, caller
        )

    def _update_from_current(
        self,
        resource_id: str,
        updated: Callable[[dict[str, Any]], dict[str, Any]],
        user: str | None,
        if_match: str | None,
        caller: Caller | None,
    ) -> ResourceMeta:
        """A partial update (a patch): the new data is computed from the current data under the lock."""
        actor = self._user(user)

        def change(session: WriteSession, current: Stored) -> ResourceMeta:
            data = updated(current.data)
            return self._store_data(
                session,
                current,
                lambda meta: self._prepare(data, meta, full=False, current=current.data),
                actor,
                caller,
            )

        return self._change(resource_id, if_match, change, action=AccessAction.PATCH, caller=caller)

    def _flag_deleted(
        self,
        resource_id: str,
        deleted: bool,
        user: str | None,
        if_match: str | None,
        caller: Caller | None,
        *,
        require_change: bool = False,
    ) -> ResourceMeta:
        actor = self._user(user)

        def change(session: WriteSession, current: Stored) -> ResourceMeta:
            if current.meta.is_deleted == deleted:
                if require_change:
                    raise NotDeletedError(f"{self.resource_name} {resource_id} is not deleted; nothing to restore")
                return current.meta
            meta = current.meta.evolve(is_deleted=deleted, updated_time=self.metadata_config.now(), updated_by=actor)
            session.save(meta, current.data)
            return meta

        action = AccessAction.DELETE if deleted else AccessAction.RESTORE
        return self._change(resource_id, if_match, change, action=action, caller=caller, allow_deleted=True)

    def delete_meta(
        self, resource_id: str, *, user: str | None = None, if_match: str | None = None, caller: Caller | None = None
    ) -> ResourceMeta:
        """Soft delete: the data and revisions stay; reads of the data answer `resource_deleted`."""
        return self._flag_deleted(resource_id, True, user, if_match, caller)

    def restore_meta(
        self,
        resource_id: str,
        *,
        user: str | None = None,
        if_match: str | None = None,
        caller: Caller | None = None,
        require_deleted: bool = False,
    ) -> ResourceMeta:
        """Undo a soft delete. Restoring a live resource changes nothing and answers its metadata,
        unless `require_deleted` (the route's `is_deleted=true`): then it is NotDeletedError (409)."""
        return self._flag_deleted(resource_id, False, user, if_match, caller, require_change=require_deleted)

    def switch_meta(
        self,
        resource_id: str,
        revision_id: str,
        *,
        user: str | None = None,
        if_match: str | None = None,
        caller: Caller | None = None,
    ) -> ResourceMeta:
        """Make an existing revision current (a rollback); the history is not rewritten."""
        actor = self._user(user)

        def change(session: WriteSession, current: Stored) -> ResourceMeta:
            if revision_id == current.meta.current_revision_id:
                return current.meta
            missing = f"revision {revision_id} of {self.resource_name} {resource_id} not found"
            meta = current.meta.evolve(
                current_revision_id=revision_id,
                updated_time=self.metadata_config.now(),
                updated_by=actor,
                schema_version=self.schema_version,
            )
            if self.migration is None and (caller is None or not caller.checks_data):
                # Nothing here looks at the revision's data: the storage copies it as stored (on
                # PostgreSQL inside the write's one statement).
                if not save_switched(session, meta):
                    raise NotFoundError(missing)
                return meta
            target = session.revision(revision_id)
            if target is None:
                raise NotFoundError(missing)
            data = self._upgrade(target.data, target.schema_version)
            if caller is not None:
                caller.check_data(data)
            session.save(meta, data)
            return meta

        return self._change(resource_id, if_match, change, action=AccessAction.SWITCH, caller=caller)

    def update(self, resource_id: str, data: Any, **kwargs: Any) -> dict[str, Any]:
        return meta_view(self.update_meta(resource_id, data, **kwargs), self.metadata_config)

    def patch(self, resource_id: str, operations: Any, **kwargs: Any) -> dict[str, Any]:
        return meta_view(self.patch_meta(resource_id, operations, **kwargs), self.metadata_config)

    def modify(self, resource_id: str, updates: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
        return meta_view(self.modify_meta(resource_id, updates, **kwargs), self.metadata_config)

    def delete(self, resource_id: str, **kwargs: Any) -> dict[str, Any]:
        return meta_view(self.delete_meta(resource_id, **kwargs), self.metadata_config)

    def restore(self, resource_id: str, **kwargs: Any) -> dict[str, Any]:
        return meta_view(self.restore_meta(resource_id, **kwargs), self.metadata_config)

    def switch(self, resource_id: str, revision_id: str, **kwargs: Any) -> dict[str, Any]:
        return meta_view(self.switch_meta(resource_id, revision_id, **kwargs), self.metadata_config)

    # -- reads ---------------------------------------------------------------------------------

    def read(self, resource_id: str, *, caller: Caller | None = None) -> Stored:
        """Metadata and current data, deleted or not."""
        return self._read(resource_id, caller)

    def read_live(self, resource_id: str, *, caller: Caller | None = None) -> Stored:
        stored = self._read(resource_id, caller)
        if stored.meta.is_deleted:
            raise ResourceDeletedError(f"{self.resource_name} {resource_id} is deleted")
        return stored

    def get(self, resource_id: str) -> Any:
        """The current data as a model instance."""
        return self.adapter.instance(self.read_live(resource_id).data)

    def get_data(self, resource_id: str) -> dict[str, Any]:
        return self.read_live(resource_id).data

    def get_meta(self, resource_id: str, *, caller: Caller | None = None) -> dict[str, Any]:
        return meta_view(self._read(resource_id, caller).meta, self.metadata_config)

    def full_view(self, stored: Stored, shape: str = "meta") -> dict[str, Any]:
        if shape == "revision_info":
            info = {
                "resource_id": stored.meta.resource_id,
                "revision_id": stored.meta.current_revision_id,
                "parent_revision_id": self._parent_of_current(stored),
                "schema_version": stored.meta.schema_version,
                **{
                    k: v
                    for k, v in meta_view(stored.meta, self.metadata_config).items()
                    if k.endswith(("_time", "_by"))
                },
                "is_deleted": stored.meta.is_deleted,
            }
            return {"data": stored.data, "revision_info": info}
        return {"data": stored.data, "meta": meta_view(stored.meta, self.metadata_config)}

    def _parent_of_current(self, stored: Stored) -> str | None:
        revision = self.storage.fetch_revision(stored.meta.resource_id, stored.meta.current_revision_id)
        return revision.parent_revision_id if revision else None

    def get_full(self, resource_id: str, shape: str = "meta", *, caller: Caller | None = None) -> dict[str, Any]:
        return self.full_view(self._read(resource_id, caller), shape)

    def get_revision(self, resource_id: str, revision_id: str, *, caller: Caller | None = None) -> dict[str, Any]:
        stored = self._read(resource_id, caller, AccessAction.READ_REVISIONS)
        revision = self.storage.fetch_revision(resource_id, revision_id)
        if revision is None:
            raise NotFoundError(f"revision {revision_id} of {self.resource_name} {resource_id} not found")
        data = self._upgrade(revision.data, revision.schema_version)
        return {"data": data, "revision_info": revision_view(revision, stored.meta, self.metadata_config)}

    def list_stored(
        self, params: ListQueryParams | None = None, *, is_deleted: bool | None = False, scope: ListScope | None = None
    ) -> tuple[list[Stored], int]:
        params = self._effective(params or ListQueryParams())
        page, total = self.storage.select(params, is_deleted, scope)
        return [self._migrated(stored) for stored in page], total

    def _effective(self, params: ListQueryParams) -> ListQueryParams:
        """The params a storage runs: data filters checked against the model (a ValueError names
        what is wrong), and user filters dropped without user tracking, as autocrud 0.2 does,
        rather than matched against users the configuration does not show."""
        changes: dict[str, Any] = {"data_filters": self.checked_filters(params.data_filters)}
        if not self.metadata_config.enable_user_tracking:
            changes.update(created_by_filter=None, updated_by_filter=None)
        return replace(params, **changes)

    def checked_filters(self, data_filters: Sequence[DataFilter]) -> tuple[DataFilter, ...]:
        checked = []
        for data_filter in data_filters:
            field = self.filterable_fields.get(data_filter.field)
            if field is None:
                offered = ", ".join(self.filterable_fields) or "none"
                raise ValueError(f"{self.resource_name} has no filterable field {data_filter.field!r} ({offered})")
            checked.append(field.checked(data_filter))
        return tuple(checked)

    def list_with_params(
        self,
        params: ListQueryParams | None = None,
        *,
        is_deleted: bool | None = False,
        view: str = "data",
        scope: ListScope | None = None,
    ) -> ListResult:
        """A page of resources; `view` is `data`, `meta` or `full`; `scope` is what the caller may list."""
        params = params or ListQueryParams()
        page, total = self.list_stored(params, is_deleted=is_deleted, scope=scope)
        render: dict[str, Callable[[Stored], dict[str, Any]]] = {
            "data": lambda stored: stored.data,
            "meta": lambda stored: meta_view(stored.meta, self.metadata_config),
            "full": lambda stored: self.full_view(stored),
        }
        return ListResult.build([render[view](stored) for stored in page], total, params)

    def count(
        self,
        is_deleted: bool | None = False,
        *,
        scope: ListScope | None = None,
        data_filters: Sequence[DataFilter] = (),
        params: ListQueryParams | None = None,
    ) -> int:
        """How many resources the list with these filters (`params`, page and sort aside, plus
        `data_filters`) would hold in all."""
        params = params or ListQueryParams()
        params = replace(params, data_filters=(*params.data_filters, *data_filters))
        return self.storage.count(is_deleted, scope, self._effective(params))

    def list_revisions(
        self, resource_id: str, page: int = 1, page_size: int = 20, *, caller: Caller | None = None
    ) -> ListResult:
        params = ListQueryParams(page=page, page_size=page_size)
        stored = self._read(resource_id, caller, AccessAction.READ_REVISIONS)
        revisions, total = self.storage.revisions(resource_id, params.offset, params.page_size)
        items = [revision_view(revision, stored.meta, self.metadata_config) for revision in revisions]
        return ListResult.build(items, total, params)

    def migrate_stored(self) -> int:
        """Rewrite every stored revision still on an older schema version; returns how many resources changed."""
        if self.migration is None:
            return 0
        changed = 0
        for snapshot in list(self.storage.export()):
            found: tuple[Stored, list[Revision]] | None = snapshot
            # A write that lands between the read and the rewrite would be undone by it: the rewrite
            # is kept only if the resource is still as read, else it is read again and redone.
            while found is not None:
                stored, revisions = found
                if stored.meta.schema_version == self.schema_version and all(
                    r.schema_version == self.schema_version for r in revisions
                ):
                    break
                upgraded = [
                    Revision(
                        r.resource_id,
                        r.revision_id,
                        r.parent_revision_id,
                        r.number,
                        self._upgrade(r.data, r.schema_version),
                        r.created_time,
                        r.created_by,
                        self.schema_version,
                    )
                    for r in revisions
                ]
                if self.storage.replace_if_unchanged(self._migrated(stored), upgraded, seen=stored.meta):
                    changed += 1
                    break
                found = self._with_history(stored.meta.resource_id)
        return changed

    def _with_history(self, resource_id: str) -> tuple[Stored, list[Revision]] | None:
        """The resource as stored now and all its revisions, oldest first (None: it is gone)."""
        stored = self.storage.fetch(resource_id)
        if stored is None:
            return None
        _, total = self.storage.revisions(resource_id, 0, 0)
        newest_first, _ = self.storage.revisions(resource_id, 0, total)
        return stored, newest_first[::-1]
