"""Behaviours taken from autocrud 0.2 where the spec is silent (crudgen/docs/from-autocrud-0.2.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from crudgen import (
    CRUDSystem,
    ListQueryParams,
    MemoryStorage,
    MetadataConfig,
    SingleModelCRUD,
    UpdateAction,
    UpdateOperation,
    ValidationFailed,
)
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Workflow

pytestmark = pytest.mark.django_db


@dataclass
class Ticket:
    title: str
    created_by: str
    updated_by: str | None = None
    labels: list[str] | None = None
    extra: dict[str, int] | None = None


def _tickets(config: MetadataConfig) -> SingleModelCRUD:
    return SingleModelCRUD(Ticket, MemoryStorage(), "tickets", metadata_config=config)


def test_full_tracking_helpers_match_autocrud() -> None:
    # Given full tracking with renamed time fields
    config = MetadataConfig.with_full_tracking(created_time_field="created_at", updated_time_field="updated_at")
    # When its helpers are asked
    filled = config.get_metadata_fields()
    create_excluded = config.get_create_excluded_fields()
    update_excluded = config.get_update_excluded_fields()
    # Then the creator stays in a create body and the last editor in a replace body
    assert filled == dict.fromkeys(["id", "created_at", "updated_at", "created_by", "updated_by"], True)
    assert create_excluded == {"id", "created_at", "updated_at", "updated_by"}
    assert update_excluded == {"id", "created_at", "updated_at", "created_by"}


def test_without_tracking_the_helpers_name_only_the_id() -> None:
    # Given the default configuration (nothing tracked)
    config = MetadataConfig()
    # When its helpers are asked
    answers = (config.get_metadata_fields(), config.get_create_excluded_fields(), config.get_update_excluded_fields())
    # Then only the id is filled by the server
    assert answers == ({"id": True}, {"id"}, {"id"})


def test_factories_take_field_names_by_keyword_only() -> None:
    # Given autocrud's keyword arguments
    config = MetadataConfig.with_user_tracking(created_by_field="author", updated_by_field="editor")
    # When a factory is called positionally
    with pytest.raises(TypeError):
        MetadataConfig.with_timestamps(lambda: None)  # type: ignore[misc]
    # Then the keyword form names the fields
    assert (config.created_by_field, config.updated_by_field, config.enable_user_tracking) == ("author", "editor", True)


def test_a_client_given_created_by_is_kept_when_no_user_is_known() -> None:
    # Given user tracking with no current user and a model whose created_by is required
    crud = _tickets(MetadataConfig.with_user_tracking())
    # When a script creates a ticket naming its creator
    meta = crud.create({"title": "t", "created_by": "importer"})
    # Then the data keeps that creator while the metadata says no user was known
    assert crud.get_data(meta["resource_id"])["created_by"] == "importer"
    assert meta["created_by"] is None


def test_a_known_user_overrides_a_client_given_created_by() -> None:
    # Given user tracking whose current user is alice
    crud = _tickets(MetadataConfig.with_user_tracking(get_current_user=lambda: "alice"))
    # When a body names someone else as creator
    meta = crud.create({"title": "t", "created_by": "forged"})
    # Then the server's user wins in data and metadata
    assert crud.get_data(meta["resource_id"])["created_by"] == "alice"
    assert meta["created_by"] == "alice"


def test_with_no_user_known_a_replace_keeps_the_creator_the_resource_had() -> None:
    # Given a ticket created by a script as importer
    crud = _tickets(MetadataConfig.with_user_tracking())
    rid = crud.create({"title": "t", "created_by": "importer"})["resource_id"]
    # When another anonymous write replaces it naming a different creator and an editor
    crud.update(rid, {"title": "t2", "created_by": "mallory", "updated_by": "script-2"})
    # Then the creator is fixed and the editor the client named is kept
    data = crud.get_data(rid)
    assert (data["title"], data["created_by"], data["updated_by"]) == ("t2", "importer", "script-2")


def test_a_missing_created_by_with_no_user_known_is_a_validation_error_and_nothing_is_stored() -> None:
    # Given user tracking with no current user and a model whose created_by is required
    crud = _tickets(MetadataConfig.with_user_tracking())
    # When a body leaves created_by out
    with pytest.raises(ValidationFailed) as caught:
        crud.create({"title": "t"})
    # Then the field is named and nothing is stored
    assert set(caught.value.fields) == {"created_by"}
    assert crud.count() == 0


@pytest.mark.parametrize(
    ("operation", "field", "expected"),
    [
        (UpdateOperation.list_add(["a"]), "labels", ["a"]),
        (UpdateOperation.dict_update({"k": 1}), "extra", {"k": 1}),
        (UpdateOperation.list_remove(["a"]), "labels", None),
    ],
    ids=["list_add", "dict_update", "list_remove"],
)
def test_list_and_dict_actions_on_a_none_field_start_from_empty(
    operation: UpdateOperation, field: str, expected: object
) -> None:
    # Given a ticket whose labels and extra are None
    crud = _tickets(MetadataConfig())
    rid = crud.create({"title": "t", "created_by": "x"})["resource_id"]
    # When an action is applied to the None field
    crud.modify(rid, {field: operation})
    # Then list_add and dict_update start from empty and list_remove has nothing to remove
    assert crud.get_data(rid)[field] == expected


def test_list_add_on_a_field_holding_something_else_is_refused_and_stores_nothing() -> None:
    # Given a ticket
    crud = _tickets(MetadataConfig())
    rid = crud.create({"title": "t", "created_by": "x"})["resource_id"]
    # When list_add targets its string title
    with pytest.raises(ValidationFailed) as caught:
        crud.modify(rid, {"title": UpdateOperation(UpdateAction.LIST_ADD, ["a"])})
    # Then it is refused by name and the revision stays
    assert set(caught.value.fields) == {"title"}
    assert crud.list_revisions(rid).total == 1


def test_user_filters_are_ignored_when_user_tracking_is_off(storage_factory: Callable[[str], Storage]) -> None:
    # Given workflows of alice and bob on a system without user tracking (each storage in turn)
    crud = CRUDSystem(storage_factory=storage_factory, use_plural=False).register_model(Workflow)
    crud.create({"name": "a", "steps": []}, user="alice")
    crud.create({"name": "b", "steps": []}, user="bob")
    # When a list filters on a creator and an editor
    result = crud.list_with_params(ListQueryParams(created_by_filter=["alice"], updated_by_filter=["nobody"]))
    # Then the filters are ignored: the configuration does not track users
    assert result.total == 2


def test_user_filters_apply_when_user_tracking_is_on(system: CRUDSystem) -> None:
    # Given workflows of alice and bob on a tracking system (each storage in turn)
    crud = system.get_crud(Workflow)
    crud.create({"name": "a", "steps": []}, user="alice")
    crud.create({"name": "b", "steps": []}, user="bob")
    # When a list filters on alice
    result = crud.list_with_params(ListQueryParams(created_by_filter=["alice"]))
    # Then only hers are listed
    assert [item["name"] for item in result.items] == ["a"]
