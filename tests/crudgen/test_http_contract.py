"""The HTTP contract of docs/ARCHITECTURE.md §7, run against every storage backend."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from rest_framework import exceptions
from rest_framework.test import APIClient

from crudgen import CRUDSystem, RouteConfig, RouteOptions
from crudgen.storage.base import Storage
from tests.crudgen.conftest import Clock

pytestmark = pytest.mark.django_db


def _etag(response) -> str:
    return response["ETag"].strip('"')


def test_create_answers_201_with_metadata_and_etag(api: APIClient) -> None:
    # Given a workflow API acting as alice at 09:00
    # When a workflow is posted
    response = api.post("/api/workflow", {"name": "build", "steps": ["make"]}, format="json")
    body = response.json()
    # Then the answer is 201 metadata whose revision is the ETag
    assert response.status_code == 201
    assert body["is_deleted"] is False
    assert body["current_revision_id"] == _etag(response)
    assert body["created_by"] == "alice"
    assert body["created_time"] == "2026-01-05T09:00:00+00:00"


def test_create_refuses_unknown_fields_and_stores_nothing(api: APIClient) -> None:
    # Given a workflow API
    # When a body carries a field the model does not have
    response = api.post("/api/workflow", {"name": "b", "steps": [], "colour": "red"}, format="json")
    # Then it is a 422 naming the field, and nothing is stored
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    assert response.json()["fields"] == {"colour": "unknown field"}
    assert api.get("/api/workflow/count").json() == {"count": 0}


def test_create_reports_a_message_per_invalid_field(api: APIClient) -> None:
    # Given a workflow API
    # When a body has a wrong name, no steps and a wrong schedule
    response = api.post("/api/workflow", {"name": 3, "every_seconds": "soon"}, format="json")
    # Then each field has its message
    assert response.status_code == 422
    assert set(response.json()["fields"]) == {"name", "steps", "every_seconds"}


def test_data_meta_and_full_reads_carry_the_current_revision_as_etag(api: APIClient, created: dict) -> None:
    # Given a created workflow
    rid = created["resource_id"]
    # When its data, meta and full are read
    data = api.get(f"/api/workflow/{rid}/data")
    meta = api.get(f"/api/workflow/{rid}/meta")
    full = api.get(f"/api/workflow/{rid}/full")
    # Then full joins data and meta, and each carries the current revision as ETag
    assert data.json() == {
        "name": "build",
        "steps": ["make"],
        "description": "",
        "every_seconds": None,
        "enabled": True,
    }
    assert meta.json()["resource_id"] == rid
    assert full.json()["data"] == data.json()
    assert full.json()["meta"] == meta.json()
    assert {_etag(data), _etag(meta), _etag(full)} == {created["current_revision_id"]}


def test_full_revision_info_shape_names_resource_and_parent(api: APIClient, created: dict) -> None:
    # Given a workflow patched once
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "b2"}], format="json")
    # When its full read is asked in the revision_info shape
    info = api.get(f"/api/workflow/{rid}/full?shape=revision_info").json()["revision_info"]
    # Then it names the resource and the first revision as parent
    assert info["resource_id"] == rid
    assert info["parent_revision_id"] == created["current_revision_id"]


def test_unknown_id_is_404_not_found(api: APIClient) -> None:
    # Given no workflow with id nope
    # When its data is read
    response = api.get("/api/workflow/nope/data")
    # Then the answer is 404 not_found
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize("route", ["data", "meta", "full", "revision-list"])
def test_an_id_too_long_to_be_a_file_name_is_404_not_found(api: APIClient, route: str) -> None:
    # Given no workflow with an id of 300 characters (longer than a file name may be on disk)
    long_id = "é" * 300
    # When it is read
    response = api.get(f"/api/workflow/{long_id}/{route}")
    # Then the answer is 404 not_found, as for any other missing id
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_a_switch_to_a_revision_id_too_long_to_be_a_file_name_is_404(api: APIClient, created: dict) -> None:
    # Given a workflow
    # When it is switched to a revision whose id is 300 characters long
    response = api.post(f"/api/workflow/{created['resource_id']}/switch/{'r' * 300}")
    # Then the answer is 404 not_found and the workflow stays at its revision
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_put_replaces_data_in_a_new_revision(api: APIClient, created: dict, clock: Clock) -> None:
    # Given a workflow, five minutes later
    rid = created["resource_id"]
    clock.advance(minutes=5)
    # When it is replaced
    response = api.put(f"/api/workflow/{rid}", {"name": "deploy", "steps": ["a", "b"]}, format="json")
    # Then a new revision is current, updated at the new time, with the new data
    assert response.status_code == 200
    assert response.json()["current_revision_id"] != created["current_revision_id"]
    assert response.json()["updated_time"] == "2026-01-05T09:05:00+00:00"
    assert api.get(f"/api/workflow/{rid}/data").json()["steps"] == ["a", "b"]


def test_writing_identical_data_creates_no_revision(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When the same data is put again
    response = api.put(f"/api/workflow/{rid}", {"name": "build", "steps": ["make"]}, format="json")
    # Then the current revision stays and no revision is added
    assert response.json()["current_revision_id"] == created["current_revision_id"]
    assert api.get(f"/api/workflow/{rid}/revision-list").json()["total"] == 1


def test_put_that_fails_validation_stores_nothing(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When a replace gives steps that are not a list
    response = api.put(f"/api/workflow/{rid}", {"name": "x", "steps": "not a list"}, format="json")
    # Then it is a 422 and the data is as it was
    assert response.status_code == 422
    assert api.get(f"/api/workflow/{rid}/data").json()["steps"] == ["make"]


@pytest.mark.parametrize(
    ("operations", "expected_steps", "expected_name"),
    [
        ([{"op": "add", "path": "/steps/-", "value": "test"}], ["make", "test"], "build"),
        ([{"op": "add", "path": "/steps/0", "value": "lint"}], ["lint", "make"], "build"),
        ([{"op": "replace", "path": "/name", "value": "ci"}], ["make"], "ci"),
        ([{"op": "remove", "path": "/steps/0"}], [], "build"),
        ([{"op": "move", "from": "/description", "path": "/name"}], ["make"], ""),
        ([{"op": "copy", "from": "/name", "path": "/description"}], ["make"], "build"),
        (
            [{"op": "test", "path": "/name", "value": "build"}, {"op": "add", "path": "/steps/-", "value": "x"}],
            ["make", "x"],
            "build",
        ),
    ],
)
def test_patch_applies_each_json_patch_operation(
    api: APIClient, created: dict, operations: list, expected_steps: list, expected_name: str
) -> None:
    # Given a workflow named build with one step
    rid = created["resource_id"]
    # When a JSON Patch is applied
    response = api.patch(f"/api/workflow/{rid}", operations, format="json")
    data = api.get(f"/api/workflow/{rid}/data").json()
    # Then the data shows the operation's effect
    assert response.status_code == 200
    assert (data["steps"], data["name"]) == (expected_steps, expected_name)


def test_patch_accepts_the_json_patch_media_type(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    body = b'[{"op": "replace", "path": "/enabled", "value": false}]'
    # When a patch is sent as application/json-patch+json
    response = api.generic("PATCH", f"/api/workflow/{rid}", body, content_type="application/json-patch+json")
    # Then it is applied
    assert response.status_code == 200
    assert api.get(f"/api/workflow/{rid}/data").json()["enabled"] is False


def test_patch_that_fails_validation_stores_nothing(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When a patch makes its name a number
    response = api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": 7}], format="json")
    # Then it is a 422 naming the field, and the revision stays
    assert response.status_code == 422
    assert response.json()["fields"] == {"name": "Expected `str`, got `int`"}
    assert api.get(f"/api/workflow/{rid}/meta").json()["current_revision_id"] == created["current_revision_id"]


def test_patch_adding_an_unknown_field_is_refused(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When a patch adds a field the model does not have
    response = api.patch(f"/api/workflow/{rid}", [{"op": "add", "path": "/owner", "value": "bob"}], format="json")
    # Then it is refused by name
    assert response.status_code == 422
    assert response.json()["fields"] == {"owner": "unknown field"}


def test_patch_with_a_failing_operation_applies_none_of_them(api: APIClient, created: dict) -> None:
    # Given a workflow with one step
    rid = created["resource_id"]
    operations = [{"op": "add", "path": "/steps/-", "value": "x"}, {"op": "remove", "path": "/steps/9"}]
    # When a patch appends a step and then removes a missing one
    response = api.patch(f"/api/workflow/{rid}", operations, format="json")
    # Then it is invalid_patch and neither operation is stored
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_patch"
    assert api.get(f"/api/workflow/{rid}/data").json()["steps"] == ["make"]


def test_a_patch_whose_copies_would_double_the_document_again_and_again_is_refused(
    api: APIClient, created: dict
) -> None:
    # Given a workflow with one step
    rid = created["resource_id"]
    # When a patch of 2 KB copies the steps into themselves 21 times (2^21 values: a few more
    # operations and the worker runs out of memory)
    operations = [{"op": "copy", "from": "/steps", "path": "/steps/-"}] * 21
    response = api.patch(f"/api/workflow/{rid}", operations, format="json")
    # Then it is refused as invalid_patch before the copies are made, and nothing is stored
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_patch"
    assert "copies" in response.json()["detail"]
    assert api.get(f"/api/workflow/{rid}/data").json()["steps"] == ["make"]


@dataclass
class Note:
    title: str
    extra: dict[str, Any] = field(default_factory=dict)


def test_a_patch_that_nests_data_deeper_than_a_body_may_is_refused(
    storage_factory: Callable[[str], Storage], mount: Callable[..., None]
) -> None:
    # Given a model with a free-form field, served over HTTP
    crud_system = CRUDSystem(storage_factory=storage_factory, use_plural=False)
    crud_system.register_model(Note)
    mount(crud_system.create_router("/api", RouteConfig()))
    api = APIClient()
    rid = api.post("/api/note", {"title": "t"}, format="json").json()["resource_id"]
    # When a patch of some 20 KB adds 50 levels at the deepest point 20 times over (each body
    # stays within the parser's 64 levels; the document reaches 1,000)
    level = {}
    for _ in range(50):
        level = {"a": level}
    operations = [{"op": "add", "path": "/extra/a", "value": level}]
    operations += [{"op": "add", "path": "/extra" + "/a" * (50 * n + 1), "value": level} for n in range(1, 20)]
    response = api.patch(f"/api/note/{rid}", operations, format="json")
    # Then it is refused as invalid_patch, like a body nested that deep, and nothing is stored
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_patch"
    assert "nested deeper" in response.json()["detail"]
    assert api.get(f"/api/note/{rid}/data").json()["extra"] == {}


def test_patch_body_that_is_not_an_array_is_invalid_patch(api: APIClient, created: dict) -> None:
    # Given a workflow
    # When a patch body is an object, not an array
    response = api.patch(f"/api/workflow/{created['resource_id']}", {"op": "add"}, format="json")
    # Then it is 422 invalid_patch
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_patch"


def test_if_match_naming_an_old_revision_is_412_and_stores_nothing(api: APIClient, created: dict) -> None:
    # Given a workflow patched once, and its first revision's tag
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "v2"}], format="json")
    stale = f'"{created["current_revision_id"]}"'
    # When another patch names that stale revision in If-Match
    response = api.patch(
        f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "v3"}], format="json", HTTP_IF_MATCH=stale
    )
    # Then it is 412 revision_conflict and the data keeps the first patch
    assert response.status_code == 412
    assert response.json()["error"] == "revision_conflict"
    assert api.get(f"/api/workflow/{rid}/data").json()["name"] == "v2"


def test_if_match_naming_the_current_revision_is_accepted(api: APIClient, created: dict) -> None:
    # Given a workflow and its current revision's tag
    rid = created["resource_id"]
    current = f'"{created["current_revision_id"]}"'
    # When a replace names it in If-Match
    response = api.put(f"/api/workflow/{rid}", {"name": "n", "steps": []}, format="json", HTTP_IF_MATCH=current)
    # Then it is stored and the ETag names the new revision
    assert response.status_code == 200
    assert response["ETag"] == f'"{response.json()["current_revision_id"]}"'


def test_delete_is_soft_and_data_then_answers_410(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When it is deleted
    response = api.delete(f"/api/workflow/{rid}")
    # Then its data answers 410 while its metadata says deleted
    assert response.status_code == 200
    assert response.json()["is_deleted"] is True
    gone = api.get(f"/api/workflow/{rid}/data")
    assert gone.status_code == 410
    assert gone.json()["error"] == "resource_deleted"
    assert api.get(f"/api/workflow/{rid}/meta").json()["is_deleted"] is True


def test_writes_to_a_deleted_resource_answer_410(api: APIClient, created: dict) -> None:
    # Given a deleted workflow
    rid = created["resource_id"]
    api.delete(f"/api/workflow/{rid}")
    # When it is replaced
    response = api.put(f"/api/workflow/{rid}", {"name": "x", "steps": []}, format="json")
    # Then the answer is 410
    assert response.status_code == 410


def test_meta_list_filters_on_is_deleted(api: APIClient, created: dict) -> None:
    # Given two workflows, one deleted
    api.post("/api/workflow", {"name": "other", "steps": []}, format="json")
    api.delete(f"/api/workflow/{created['resource_id']}")
    # When the meta list is asked for deleted and for live ones
    deleted = api.get("/api/workflow/meta?is_deleted=true").json()
    live = api.get("/api/workflow/meta?is_deleted=false").json()
    # Then each holds its own
    assert [item["resource_id"] for item in deleted["items"]] == [created["resource_id"]]
    assert live["total"] == 1


def test_data_list_and_count_leave_soft_deleted_resources_out(api: APIClient, created: dict) -> None:
    # Given a deleted workflow
    # When the data lists and the count are read
    api.delete(f"/api/workflow/{created['resource_id']}")
    # Then it is in none of them
    assert api.get("/api/workflow/data").json()["total"] == 0
    assert api.get("/api/workflow").json()["total"] == 0
    assert api.get("/api/workflow/count").json() == {"count": 0}


def test_restore_makes_data_readable_again(api: APIClient, created: dict) -> None:
    # Given a deleted workflow
    rid = created["resource_id"]
    api.delete(f"/api/workflow/{rid}")
    # When it is restored
    response = api.post(f"/api/workflow/{rid}/restore?is_deleted=true")
    # Then it is live and its data readable again
    assert response.status_code == 200
    assert response.json()["is_deleted"] is False
    assert api.get(f"/api/workflow/{rid}/data").status_code == 200


def test_a_patch_that_changes_nothing_creates_no_revision(api: APIClient, created: dict) -> None:
    # Given a workflow named build
    rid = created["resource_id"]
    # When a patch replaces the name with the name it already has
    response = api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "build"}], format="json")
    # Then the answer names the current revision and no revision is added
    assert response.status_code == 200
    assert response.json()["current_revision_id"] == created["current_revision_id"]
    assert api.get(f"/api/workflow/{rid}/revision-list").json()["total"] == 1


def test_restore_of_a_live_resource_without_is_deleted_changes_nothing(api: APIClient, created: dict) -> None:
    # Given a live workflow
    rid = created["resource_id"]
    # When it is restored without stating that it is deleted
    response = api.post(f"/api/workflow/{rid}/restore")
    # Then it answers its unchanged metadata
    assert response.status_code == 200
    assert response.json()["is_deleted"] is False
    assert response.json()["updated_time"] == created["updated_time"]


def test_restore_stating_is_deleted_of_a_live_resource_is_409_and_changes_nothing(
    api: APIClient, created: dict
) -> None:
    # Given a live workflow
    rid = created["resource_id"]
    # When a restore states that it is deleted
    response = api.post(f"/api/workflow/{rid}/restore?is_deleted=true")
    # Then it is 409 not_deleted, and the resource is as it was
    assert response.status_code == 409
    assert response.json()["error"] == "not_deleted"
    assert api.get(f"/api/workflow/{rid}/meta").json()["updated_time"] == created["updated_time"]


@pytest.mark.parametrize("value", ["false", "maybe"])
def test_restore_with_an_is_deleted_that_is_not_true_is_422(api: APIClient, created: dict, value: str) -> None:
    # Given a deleted workflow
    rid = created["resource_id"]
    api.delete(f"/api/workflow/{rid}")
    # When a restore passes is_deleted other than true
    response = api.post(f"/api/workflow/{rid}/restore?is_deleted={value}")
    # Then it is 422 naming is_deleted, and the workflow stays deleted
    assert response.status_code == 422
    assert "is_deleted" in response.json()["fields"]
    assert api.get(f"/api/workflow/{rid}/meta").json()["is_deleted"] is True


def test_switch_makes_an_older_revision_current(api: APIClient, created: dict) -> None:
    # Given a workflow renamed v2
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "v2"}], format="json")
    # When it is switched back to its first revision
    response = api.post(f"/api/workflow/{rid}/switch/{created['current_revision_id']}")
    # Then that revision is current and its data is back
    assert response.status_code == 200
    assert response.json()["current_revision_id"] == created["current_revision_id"]
    assert api.get(f"/api/workflow/{rid}/data").json()["name"] == "build"


def test_switch_to_an_unknown_revision_is_404(api: APIClient, created: dict) -> None:
    # Given a workflow
    # When it is switched to a revision that does not exist
    response = api.post(f"/api/workflow/{created['resource_id']}/switch/nope")
    # Then the answer is 404 not_found
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_revision_list_is_newest_first_and_paginated(api: APIClient, created: dict) -> None:
    # Given a workflow with three revisions
    rid = created["resource_id"]
    for name in ("v2", "v3"):
        api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": name}], format="json")
    # When the first page of two is read
    page = api.get(f"/api/workflow/{rid}/revision-list?page_size=2").json()
    # Then it holds the newest two and says more follow
    assert page["total"] == 3
    assert page["has_next"] is True
    assert [item["revision_id"] for item in page["items"]] == [f"{rid}:3", f"{rid}:2"]


def test_list_result_shape_and_pagination(api: APIClient, clock: Clock) -> None:
    # Given five workflows created a second apart
    for index in range(5):
        clock.advance(seconds=1)
        api.post("/api/workflow", {"name": f"w{index}", "steps": []}, format="json")
    # When the second page of two is read
    body = api.get("/api/workflow/data?page=2&page_size=2").json()
    # Then it has the ListResult shape and the middle two, newest first
    assert set(body) == {"items", "total", "page", "page_size", "total_pages", "has_next", "has_prev"}
    assert [item["name"] for item in body["items"]] == ["w2", "w1"]
    assert (body["total"], body["total_pages"], body["has_next"], body["has_prev"]) == (5, 3, True, True)


@pytest.mark.parametrize("page_size", ["0", "1001", "many"])
def test_page_size_outside_1_to_1000_is_422(api: APIClient, page_size: str) -> None:
    # Given a workflow API
    # When a page size outside 1..1000 is asked
    response = api.get(f"/api/workflow/data?page_size={page_size}")
    # Then it is a 422 naming page_size
    assert response.status_code == 422
    assert "page_size" in response.json()["fields"]


def test_sort_order_ascending_on_a_metadata_field(api: APIClient, clock: Clock) -> None:
    # Given three workflows created a second apart
    for name in ("a", "b", "c"):
        clock.advance(seconds=1)
        api.post("/api/workflow", {"name": name, "steps": []}, format="json")
    # When the list is sorted by created_time ascending
    body = api.get("/api/workflow/data?sort_by=created_time&sort_order=asc").json()
    # Then the oldest comes first
    assert [item["name"] for item in body["items"]] == ["a", "b", "c"]


def test_sort_by_a_field_that_is_not_metadata_is_422(api: APIClient) -> None:
    # Given a workflow API
    # When a list is sorted by a data field
    response = api.get("/api/workflow/data?sort_by=name")
    # Then it is a 422
    assert response.status_code == 422


def test_created_by_filters_repeat_and_are_ored(api: APIClient) -> None:
    # Given workflows of alice, bob and carol
    for user in ("alice", "bob", "carol"):
        api.post("/api/workflow", {"name": user, "steps": []}, format="json", HTTP_X_USER_ID=user)
    # When the meta list filters on alice and on bob
    body = api.get("/api/workflow/meta?created_by=alice&created_by=bob").json()
    # Then it holds both of theirs
    assert sorted(item["created_by"] for item in body["items"]) == ["alice", "bob"]


def test_full_list_filters_on_created_time_range(api: APIClient, clock: Clock) -> None:
    # Given one workflow at 09:00 and one at 10:00
    api.post("/api/workflow", {"name": "early", "steps": []}, format="json")
    clock.advance(hours=1)
    api.post("/api/workflow", {"name": "late", "steps": []}, format="json")
    # When the full list starts at 09:30
    body = api.get("/api/workflow/full", {"created_time_start": "2026-01-05T09:30:00+00:00"}).json()
    # Then only the later one is listed
    assert [item["data"]["name"] for item in body["items"]] == ["late"]


def test_a_time_filter_without_timezone_is_422(api: APIClient) -> None:
    # Given a workflow API
    # When a time filter has no timezone
    response = api.get("/api/workflow/full?created_time_end=2026-01-05T09:30:00")
    # Then it is a 422
    assert response.status_code == 422


def test_a_time_filter_with_an_offset_beyond_postgresqls_range_is_read_in_utc(api: APIClient, clock: Clock) -> None:
    # Found by the fuzzer: PostgreSQL refused -21:44 (its offsets stop at ±15:59), a 500.
    # Given one workflow at 09:00 and one at 10:00
    api.post("/api/workflow", {"name": "early", "steps": []}, format="json")
    clock.advance(hours=1)
    api.post("/api/workflow", {"name": "late", "steps": []}, format="json")

    # When the full list starts at 09:30 UTC written with a -21:44 offset
    response = api.get("/api/workflow/full", {"created_time_start": "2026-01-04T11:46:00-21:44"})

    # Then it answers 200 with the later one
    assert response.status_code == 200
    assert [item["data"]["name"] for item in response.json()["items"]] == ["late"]


def test_a_time_filter_out_of_range_in_utc_is_422(api: APIClient) -> None:
    # Given a workflow API
    # When a time filter falls before year 1 once in UTC
    response = api.get("/api/workflow/meta", {"created_time_end": "0001-01-01T00:00:00+05:00"})

    # Then it is a 422 naming it
    assert response.status_code == 422
    assert "created_time_end" in response.json()["fields"]


def test_a_well_formed_but_impossible_time_filter_is_422(api: APIClient) -> None:
    # Given a workflow API
    # When a time filter names month 13
    response = api.get("/api/workflow/meta", {"updated_time_start": "2026-13-01T00:00:00Z"})

    # Then it is a 422 naming it
    assert response.status_code == 422
    assert "updated_time_start" in response.json()["fields"]


def test_earlier_route_set_reads_by_id(api: APIClient, created: dict) -> None:
    # Given a workflow
    # When it is read at the earlier route GET /<m>/<id>
    response = api.get(f"/api/workflow/{created['resource_id']}")
    # Then its data is answered
    assert response.status_code == 200
    assert response.json()["name"] == "build"


def test_updated_by_tracks_the_caller(api: APIClient, created: dict) -> None:
    # Given alice's workflow
    rid = created["resource_id"]
    # When bob patches it
    response = api.patch(
        f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "b"}], format="json", HTTP_X_USER_ID="bob"
    )
    # Then bob is its last editor and alice still its creator
    assert response.json()["updated_by"] == "bob"
    assert response.json()["created_by"] == "alice"


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x"])
@pytest.mark.parametrize(("method", "path"), [("POST", ""), ("PUT", "/{rid}"), ("PATCH", "/{rid}")])
def test_a_form_body_is_415_on_every_write_and_stores_nothing(
    api: APIClient, created: dict, method: str, path: str, content_type: str
) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When a create, a replace or a patch comes as a form body
    target = "/api/workflow" + path.format(rid=rid)
    response = api.generic(method, target, "name=x&steps=make", content_type=content_type)
    # Then it is 415 unsupported_media_type, and the workflow is the one revision it was
    assert (response.status_code, response.json()["error"]) == (415, "unsupported_media_type")
    assert api.get("/api/workflow/count").json() == {"count": 1}
    assert api.get(f"/api/workflow/{rid}/meta").json()["current_revision_id"] == created["current_revision_id"]


def test_a_json_patch_is_not_taken_where_a_model_is_expected(api: APIClient) -> None:
    # Given a workflow API
    # When a create is sent as application/json-patch+json
    body = b'{"name": "build", "steps": ["make"]}'
    response = api.generic("POST", "/api/workflow", body, content_type="application/json-patch+json")
    # Then it is 415: a create takes the model as application/json only
    assert response.status_code == 415


def test_patch_also_takes_plain_json(api: APIClient, created: dict) -> None:
    # Given a workflow
    rid = created["resource_id"]
    # When a patch is sent as application/json, as curl users do
    response = api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "b2"}], format="json")
    # Then it is applied
    assert (response.status_code, api.get(f"/api/workflow/{rid}/data").json()["name"]) == (200, "b2")


def test_an_error_the_host_project_raises_keeps_its_code(system: CRUDSystem, mount: Callable[..., None]) -> None:
    # Given create guarded by a host check that refuses with a code of its own (as a CSRF check does)
    def refuse(request: Any) -> bool:
        raise exceptions.APIException(detail="The host says no.", code="host_refused")

    mount(system.create_router("/api", RouteConfig(create=RouteOptions(custom_dependencies=[refuse]))))
    # When a workflow is posted
    response = APIClient().post("/api/workflow", {"name": "w", "steps": []}, format="json")
    # Then the body names that code with the detail, not a bare "error"
    assert response.json() == {"error": "host_refused", "detail": "The host says no."}
