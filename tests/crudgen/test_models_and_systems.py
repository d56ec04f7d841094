"""Model kinds and field types, default_values, naming, registry errors and MetadataConfig."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, TypedDict

import msgspec
import pytest

from crudgen import (
    CRUDSystem,
    MemoryStorage,
    MetadataConfig,
    ResourceNameStyle,
    SingleModelCRUD,
    UpdateAction,
    UpdateOperation,
    ValidationFailed,
)
from tests.crudgen.example_app import Address, Colour


@dataclass
class Rich:
    name: str
    score: float
    active: bool
    colour: Colour
    level: Literal["low", "high"]
    tags: list[str]
    extra: dict[str, int]
    address: Address
    due: datetime | None = None
    note: str | None = None


class Point(TypedDict):
    x: int
    y: int


class Tag(msgspec.Struct):
    label: str
    weight: int = 1


def _crud(model: type, **kwargs) -> SingleModelCRUD:
    return SingleModelCRUD(model, MemoryStorage(), "things", **kwargs)


RICH = {
    "name": "n",
    "score": 1,
    "active": True,
    "colour": "red",
    "level": "low",
    "tags": ["a"],
    "extra": {"k": 1},
    "address": {"city": "Oslo"},
    "due": "2026-01-05T10:00:00+01:00",
}


def test_a_dataclass_with_every_supported_field_type_round_trips() -> None:
    # Given a dataclass with scalars, an enum, a literal, lists, dicts, a nested dataclass and a datetime
    crud = _crud(Rich)
    rid = crud.create(RICH)["resource_id"]
    # When a resource is created and read back as an instance
    instance = crud.get(rid)
    # Then every field has its type, and the datetime is stored in UTC
    assert instance.colour is Colour.RED
    assert instance.address == Address("Oslo")
    assert instance.due == datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    assert crud.get_data(rid)["due"] == "2026-01-05T09:00:00Z"


def test_a_naive_datetime_is_refused() -> None:
    # Given a model with a datetime field
    # When a body gives it without a timezone
    # Then the field is refused by name
    with pytest.raises(ValidationFailed) as caught:
        _crud(Rich).create({**RICH, "due": "2026-01-05T10:00:00"})
    assert caught.value.fields == {"due": "datetime must carry a timezone"}


def test_unknown_fields_in_nested_models_are_refused() -> None:
    # Given a model nesting an address
    # When the address carries a field the model does not have
    # Then it is refused with its dotted path
    with pytest.raises(ValidationFailed) as caught:
        _crud(Rich).create({**RICH, "address": {"city": "Oslo", "zip": "0150"}})
    assert caught.value.fields == {"address.zip": "unknown field"}


def test_literal_and_enum_values_outside_their_sets_are_refused() -> None:
    # Given a model with an enum and a literal field
    # When both get values outside their sets
    # Then both fields are named
    with pytest.raises(ValidationFailed) as caught:
        _crud(Rich).create({**RICH, "colour": "green", "level": "mid"})
    assert set(caught.value.fields) == {"colour", "level"}


def test_a_typeddict_model_is_validated() -> None:
    # Given a TypedDict model
    crud = _crud(Point)
    # When a point is created, then one with an extra key
    rid = crud.create({"x": 1, "y": 2})["resource_id"]
    # Then the first reads back and the second is refused
    assert crud.get(rid) == {"x": 1, "y": 2}
    with pytest.raises(ValidationFailed):
        crud.create({"x": 1, "y": 2, "z": 3})


def test_a_msgspec_struct_model_is_validated() -> None:
    # Given a msgspec Struct model with a default
    crud = _crud(Tag)
    # When a tag is created without its weight
    rid = crud.create({"label": "l"})["resource_id"]
    # Then it reads back as a Struct, the default stored
    assert crud.get(rid) == Tag("l", 1)
    assert crud.get_data(rid) == {"label": "l", "weight": 1}


def test_default_values_turn_required_fields_into_optional_ones() -> None:
    # Given a required y with a default value at registration
    crud = _crud(Point, default_values={"y": 0})
    # When a point is created without y
    rid = crud.create({"x": 5})["resource_id"]
    # Then y holds the default
    assert crud.get_data(rid) == {"x": 5, "y": 0}


def test_default_values_naming_an_unknown_field_are_refused() -> None:
    # Given a model without a z field
    # When default_values name z
    # Then registration is refused
    with pytest.raises(ValueError, match="unknown fields"):
        _crud(Point, default_values={"z": 0})


def test_python_side_create_records_the_explicit_user() -> None:
    # Given user tracking whose provider says `provider`
    # When one create names its user and another does not
    crud = _crud(Point, metadata_config=MetadataConfig.with_user_tracking(get_current_user=lambda: "provider"))
    # Then the named user wins, else the provider's
    assert crud.create({"x": 1, "y": 1}, user="explicit")["created_by"] == "explicit"
    assert crud.create({"x": 1, "y": 1})["created_by"] == "provider"


def test_resource_id_is_a_uuid4_string() -> None:
    # Given the default id generator
    import uuid

    # When a resource is created
    rid = _crud(Point).create({"x": 1, "y": 1})["resource_id"]
    # Then its id is a UUID4 string
    assert uuid.UUID(rid).version == 4


def test_id_generator_is_used_for_resource_ids() -> None:
    # Given a CRUD with its own id generator
    # When a resource is created
    crud = _crud(Point, id_generator=lambda: "fixed")
    # Then the generator's id is used
    assert crud.create({"x": 1, "y": 1})["resource_id"] == "fixed"


def test_model_fields_named_like_metadata_are_filled_by_the_server() -> None:
    # Given a model with id and created_by fields, and user tracking
    @dataclass
    class Note:
        text: str
        id: str | None = None
        created_by: str | None = None

    crud = _crud(Note, metadata_config=MetadataConfig.with_user_tracking())
    # When alice creates a note whose body forges created_by
    meta = crud.create({"text": "t", "created_by": "forged"}, user="alice")
    # Then the server fills id and created_by
    assert crud.get_data(meta["resource_id"]) == {"text": "t", "id": meta["resource_id"], "created_by": "alice"}


def test_update_operations_apply_each_action() -> None:
    # Given a resource with a name, tags and extra
    crud = _crud(Rich)
    rid = crud.create(RICH)["resource_id"]
    crud.modify(
        rid,
        {
            "name": UpdateOperation(UpdateAction.SET_VALUE, "m"),
            "tags": UpdateOperation(UpdateAction.LIST_ADD, ["b"]),
            "extra": UpdateOperation(UpdateAction.DICT_UPDATE, {"j": 2}),
        },
    )
    # When each update action is applied
    crud.modify(rid, {"tags": UpdateOperation(UpdateAction.LIST_REMOVE, "a")})
    data = crud.get_data(rid)
    # Then set, add, remove and dict update all took effect
    assert (data["name"], data["tags"], data["extra"]) == ("m", ["b"], {"k": 1, "j": 2})


@pytest.mark.parametrize(
    ("style", "plural", "expected"),
    [
        (ResourceNameStyle.SNAKE, True, "user_profiles"),
        (ResourceNameStyle.CAMEL, True, "userProfiles"),
        (ResourceNameStyle.DASH, True, "user-profiles"),
        (ResourceNameStyle.DASH, False, "user-profile"),
    ],
)
def test_resource_names_follow_style_and_plural(style: ResourceNameStyle, plural: bool, expected: str) -> None:
    # Given a system with a naming style and plural choice
    class UserProfile(TypedDict):
        name: str

    # When a UserProfile model is registered
    crud_system = CRUDSystem(use_plural=plural, resource_name_style=style)
    # Then its resource name follows them
    assert crud_system.register_model(UserProfile).resource_name == expected


@pytest.mark.parametrize(("name", "expected"), [("Category", "categories"), ("Box", "boxes"), ("Day", "days")])
def test_plural_forms_of_english_names(name: str, expected: str) -> None:
    # Given a model class named like an English noun
    model = type(name, (), {"__annotations__": {"x": int}})
    # When it is registered with plural names
    model = dataclass(model)
    # Then the plural follows English spelling
    assert CRUDSystem().register_model(model).resource_name == expected


def test_use_plural_does_not_touch_a_given_resource_name() -> None:
    # Given a plural system
    # When a model is registered under a given name
    # Then the name is kept as given
    assert CRUDSystem(use_plural=True).register_model(Point, resource_name="point").resource_name == "point"


def test_register_model_use_plural_overrides_the_system_default() -> None:
    # Given a plural system
    # When a model is registered with use_plural=False
    # Then its derived name is singular
    assert CRUDSystem(use_plural=True).register_model(Point, use_plural=False).resource_name == "point"


def test_get_crud_of_an_unregistered_class_raises_value_error() -> None:
    # Given an empty system
    # When a class is looked up
    # Then ValueError says it is not registered
    with pytest.raises(ValueError, match="not registered"):
        CRUDSystem().get_crud(Point)


def test_get_crud_of_a_class_registered_under_two_names_raises_value_error() -> None:
    # Given a class registered under two names
    crud_system = CRUDSystem()
    crud_system.register_model(Point, resource_name="a")
    crud_system.register_model(Point, resource_name="b")
    # When it is looked up by class
    # Then ValueError says the lookup is ambiguous
    with pytest.raises(ValueError, match="several names"):
        crud_system.get_crud(Point)


def test_registering_one_resource_name_twice_raises_value_error() -> None:
    # Given a resource name already taken
    crud_system = CRUDSystem()
    crud_system.register_model(Point, resource_name="a")
    # When another model is registered under it
    # Then ValueError says so
    with pytest.raises(ValueError, match="already registered"):
        crud_system.register_model(Tag, resource_name="a")


def test_storage_factory_builds_one_storage_per_model() -> None:
    # Given a storage factory that records the names it is given
    built: list[str] = []

    def factory(name: str) -> MemoryStorage:
        built.append(name)
        return MemoryStorage()

    crud_system = CRUDSystem(storage_factory=factory)
    crud_system.register_model(Point)
    # When two models are registered
    crud_system.register_model(Tag)
    # Then each got its own storage, named after it
    assert built == ["points", "tags"]


def test_metadata_config_defaults_match_the_spec() -> None:
    # Given the default MetadataConfig
    # When its fields are read
    config = MetadataConfig()
    # Then they are the spec's defaults
    assert (config.id_field, config.enable_timestamps, config.enable_user_tracking) == ("id", False, False)
    assert (config.created_time_field, config.updated_by_field) == ("created_time", "updated_by")
    assert (config.get_current_time, config.get_current_user) == (None, None)


def test_metadata_config_factories_enable_their_tracking() -> None:
    # Given the three factories
    # When each builds a configuration
    # Then each enables what it names
    assert MetadataConfig.with_timestamps().enable_timestamps is True
    assert MetadataConfig.with_user_tracking().enable_user_tracking is True
    full = MetadataConfig.with_full_tracking()
    assert (full.enable_timestamps, full.enable_user_tracking) == (True, True)


def test_metadata_helpers_name_fields_and_exclusions() -> None:
    # Given a configuration with timestamps only
    config = MetadataConfig.with_timestamps()
    # When its helpers are asked
    filled = config.get_metadata_fields()
    create_excluded = config.get_create_excluded_fields()
    update_excluded = config.get_update_excluded_fields()
    # Then they name the fields it fills, as autocrud 0.2 does
    assert filled == {"id": True, "created_time": True, "updated_time": True}
    assert create_excluded == {"id", "created_time", "updated_time"}
    assert update_excluded == {"id", "created_time", "updated_time"}


def test_meta_hides_time_and_user_fields_when_not_tracked() -> None:
    # Given a CRUD without timestamps or user tracking
    # When a resource is created
    meta = _crud(Point).create({"x": 1, "y": 1})
    # Then its metadata shows no time or user fields
    assert set(meta) == {"resource_id", "current_revision_id", "is_deleted", "schema_version"}
