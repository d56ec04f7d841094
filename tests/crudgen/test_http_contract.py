"""The HTTP contract of docs/ARCHITECTURE.md §7, run against every storage backend."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.crudgen.conftest import Clock

pytestmark = pytest.mark.django_db


def _etag(response) -> str:
    return response["ETag"].strip('"')


def test_create_answers_201_with_metadata_and_etag(api: APIClient) -> None:
    response = api.post("/api/workflow", {"name": "build", "steps": ["make"]}, format="json")
    body = response.json()
    assert response.status_code == 201
    assert body["is_deleted"] is False
    assert body["current_revision_id"] == _etag(response)
    assert body["created_by"] == "alice"
    assert body["created_time"] == "2026-01-05T09:00:00+00:00"


def test_create_refuses_unknown_fields_and_stores_nothing(api: APIClient) -> None:
    response = api.post("/api/workflow", {"name": "b", "steps": [], "colour": "red"}, format="json")
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"
    assert response.json()["fields"] == {"colour": "unknown field"}
    assert api.get("/api/workflow/count").json() == {"count": 0}


def test_create_reports_a_message_per_invalid_field(api: APIClient) -> None:
    response = api.post("/api/workflow", {"name": 3, "every_seconds": "soon"}, format="json")
    assert response.status_code == 422
    assert set(response.json()["fields"]) == {"name", "steps", "every_seconds"}


def test_data_meta_and_full_reads_carry_the_current_revision_as_etag(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    data = api.get(f"/api/workflow/{rid}/data")
    meta = api.get(f"/api/workflow/{rid}/meta")
    full = api.get(f"/api/workflow/{rid}/full")
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
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "b2"}], format="json")
    info = api.get(f"/api/workflow/{rid}/full?shape=revision_info").json()["revision_info"]
    assert info["resource_id"] == rid
    assert info["parent_revision_id"] == created["current_revision_id"]


def test_unknown_id_is_404_not_found(api: APIClient) -> None:
    response = api.get("/api/workflow/nope/data")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_put_replaces_data_in_a_new_revision(api: APIClient, created: dict, clock: Clock) -> None:
    rid = created["resource_id"]
    clock.advance(minutes=5)
    response = api.put(f"/api/workflow/{rid}", {"name": "deploy", "steps": ["a", "b"]}, format="json")
    assert response.status_code == 200
    assert response.json()["current_revision_id"] != created["current_revision_id"]
    assert response.json()["updated_time"] == "2026-01-05T09:05:00+00:00"
    assert api.get(f"/api/workflow/{rid}/data").json()["steps"] == ["a", "b"]


def test_writing_identical_data_creates_no_revision(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    response = api.put(f"/api/workflow/{rid}", {"name": "build", "steps": ["make"]}, format="json")
    assert response.json()["current_revision_id"] == created["current_revision_id"]
    assert api.get(f"/api/workflow/{rid}/revision-list").json()["total"] == 1


def test_put_that_fails_validation_stores_nothing(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    response = api.put(f"/api/workflow/{rid}", {"name": "x", "steps": "not a list"}, format="json")
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
    rid = created["resource_id"]
    response = api.patch(f"/api/workflow/{rid}", operations, format="json")
    data = api.get(f"/api/workflow/{rid}/data").json()
    assert response.status_code == 200
    assert (data["steps"], data["name"]) == (expected_steps, expected_name)


def test_patch_accepts_the_json_patch_media_type(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    body = b'[{"op": "replace", "path": "/enabled", "value": false}]'
    response = api.generic("PATCH", f"/api/workflow/{rid}", body, content_type="application/json-patch+json")
    assert response.status_code == 200
    assert api.get(f"/api/workflow/{rid}/data").json()["enabled"] is False


def test_patch_that_fails_validation_stores_nothing(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    response = api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": 7}], format="json")
    assert response.status_code == 422
    assert response.json()["fields"] == {"name": "Expected `str`, got `int`"}
    assert api.get(f"/api/workflow/{rid}/meta").json()["current_revision_id"] == created["current_revision_id"]


def test_patch_adding_an_unknown_field_is_refused(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    response = api.patch(f"/api/workflow/{rid}", [{"op": "add", "path": "/owner", "value": "bob"}], format="json")
    assert response.status_code == 422
    assert response.json()["fields"] == {"owner": "unknown field"}


def test_patch_with_a_failing_operation_applies_none_of_them(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    operations = [{"op": "add", "path": "/steps/-", "value": "x"}, {"op": "remove", "path": "/steps/9"}]
    response = api.patch(f"/api/workflow/{rid}", operations, format="json")
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_patch"
    assert api.get(f"/api/workflow/{rid}/data").json()["steps"] == ["make"]


def test_patch_body_that_is_not_an_array_is_invalid_patch(api: APIClient, created: dict) -> None:
    response = api.patch(f"/api/workflow/{created['resource_id']}", {"op": "add"}, format="json")
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_patch"


def test_if_match_naming_an_old_revision_is_412_and_stores_nothing(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "v2"}], format="json")
    stale = f'"{created["current_revision_id"]}"'
    response = api.patch(
        f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "v3"}], format="json", HTTP_IF_MATCH=stale
    )
    assert response.status_code == 412
    assert response.json()["error"] == "revision_conflict"
    assert api.get(f"/api/workflow/{rid}/data").json()["name"] == "v2"


def test_if_match_naming_the_current_revision_is_accepted(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    current = f'"{created["current_revision_id"]}"'
    response = api.put(f"/api/workflow/{rid}", {"name": "n", "steps": []}, format="json", HTTP_IF_MATCH=current)
    assert response.status_code == 200
    assert response["ETag"] == f'"{response.json()["current_revision_id"]}"'


def test_delete_is_soft_and_data_then_answers_410(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    response = api.delete(f"/api/workflow/{rid}")
    assert response.status_code == 200
    assert response.json()["is_deleted"] is True
    gone = api.get(f"/api/workflow/{rid}/data")
    assert gone.status_code == 410
    assert gone.json()["error"] == "resource_deleted"
    assert api.get(f"/api/workflow/{rid}/meta").json()["is_deleted"] is True


def test_writes_to_a_deleted_resource_answer_410(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    api.delete(f"/api/workflow/{rid}")
    response = api.put(f"/api/workflow/{rid}", {"name": "x", "steps": []}, format="json")
    assert response.status_code == 410


def test_meta_list_filters_on_is_deleted(api: APIClient, created: dict) -> None:
    api.post("/api/workflow", {"name": "other", "steps": []}, format="json")
    api.delete(f"/api/workflow/{created['resource_id']}")
    deleted = api.get("/api/workflow/meta?is_deleted=true").json()
    live = api.get("/api/workflow/meta?is_deleted=false").json()
    assert [item["resource_id"] for item in deleted["items"]] == [created["resource_id"]]
    assert live["total"] == 1


def test_data_list_and_count_leave_soft_deleted_resources_out(api: APIClient, created: dict) -> None:
    api.delete(f"/api/workflow/{created['resource_id']}")
    assert api.get("/api/workflow/data").json()["total"] == 0
    assert api.get("/api/workflow").json()["total"] == 0
    assert api.get("/api/workflow/count").json() == {"count": 0}


def test_restore_makes_data_readable_again(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    api.delete(f"/api/workflow/{rid}")
    response = api.post(f"/api/workflow/{rid}/restore?is_deleted=true")
    assert response.status_code == 200
    assert response.json()["is_deleted"] is False
    assert api.get(f"/api/workflow/{rid}/data").status_code == 200


def test_switch_makes_an_older_revision_current(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "v2"}], format="json")
    response = api.post(f"/api/workflow/{rid}/switch/{created['current_revision_id']}")
    assert response.status_code == 200
    assert response.json()["current_revision_id"] == created["current_revision_id"]
    assert api.get(f"/api/workflow/{rid}/data").json()["name"] == "build"


def test_switch_to_an_unknown_revision_is_404(api: APIClient, created: dict) -> None:
    response = api.post(f"/api/workflow/{created['resource_id']}/switch/nope")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


def test_revision_list_is_newest_first_and_paginated(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    for name in ("v2", "v3"):
        api.patch(f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": name}], format="json")
    page = api.get(f"/api/workflow/{rid}/revision-list?page_size=2").json()
    assert page["total"] == 3
    assert page["has_next"] is True
    assert [item["revision_id"] for item in page["items"]] == [f"{rid}:3", f"{rid}:2"]


def test_list_result_shape_and_pagination(api: APIClient, clock: Clock) -> None:
    for index in range(5):
        clock.advance(seconds=1)
        api.post("/api/workflow", {"name": f"w{index}", "steps": []}, format="json")
    body = api.get("/api/workflow/data?page=2&page_size=2").json()
    assert set(body) == {"items", "total", "page", "page_size", "total_pages", "has_next", "has_prev"}
    assert [item["name"] for item in body["items"]] == ["w2", "w1"]
    assert (body["total"], body["total_pages"], body["has_next"], body["has_prev"]) == (5, 3, True, True)


@pytest.mark.parametrize("page_size", ["0", "1001", "many"])
def test_page_size_outside_1_to_1000_is_422(api: APIClient, page_size: str) -> None:
    response = api.get(f"/api/workflow/data?page_size={page_size}")
    assert response.status_code == 422
    assert "page_size" in response.json()["fields"]


def test_sort_order_ascending_on_a_metadata_field(api: APIClient, clock: Clock) -> None:
    for name in ("a", "b", "c"):
        clock.advance(seconds=1)
        api.post("/api/workflow", {"name": name, "steps": []}, format="json")
    body = api.get("/api/workflow/data?sort_by=created_time&sort_order=asc").json()
    assert [item["name"] for item in body["items"]] == ["a", "b", "c"]


def test_sort_by_a_field_that_is_not_metadata_is_422(api: APIClient) -> None:
    response = api.get("/api/workflow/data?sort_by=name")
    assert response.status_code == 422


def test_created_by_filters_repeat_and_are_ored(api: APIClient) -> None:
    for user in ("alice", "bob", "carol"):
        api.post("/api/workflow", {"name": user, "steps": []}, format="json", HTTP_X_USER_ID=user)
    body = api.get("/api/workflow/meta?created_by=alice&created_by=bob").json()
    assert sorted(item["created_by"] for item in body["items"]) == ["alice", "bob"]


def test_full_list_filters_on_created_time_range(api: APIClient, clock: Clock) -> None:
    api.post("/api/workflow", {"name": "early", "steps": []}, format="json")
    clock.advance(hours=1)
    api.post("/api/workflow", {"name": "late", "steps": []}, format="json")
    body = api.get("/api/workflow/full", {"created_time_start": "2026-01-05T09:30:00+00:00"}).json()
    assert [item["data"]["name"] for item in body["items"]] == ["late"]


def test_a_time_filter_without_timezone_is_422(api: APIClient) -> None:
    response = api.get("/api/workflow/full?created_time_end=2026-01-05T09:30:00")
    assert response.status_code == 422


def test_a_time_filter_with_an_offset_beyond_postgresqls_range_is_read_in_utc(api: APIClient, clock: Clock) -> None:
    # Found by the fuzzer: PostgreSQL refused -21:44 (its offsets stop at ±15:59), a 500.
    api.post("/api/workflow", {"name": "early", "steps": []}, format="json")
    clock.advance(hours=1)
    api.post("/api/workflow", {"name": "late", "steps": []}, format="json")

    # 2026-01-05T09:30Z written with a -21:44 offset.
    response = api.get("/api/workflow/full", {"created_time_start": "2026-01-04T11:46:00-21:44"})

    assert response.status_code == 200
    assert [item["data"]["name"] for item in response.json()["items"]] == ["late"]


def test_a_time_filter_out_of_range_in_utc_is_422(api: APIClient) -> None:
    response = api.get("/api/workflow/meta", {"created_time_end": "0001-01-01T00:00:00+05:00"})

    assert response.status_code == 422
    assert "created_time_end" in response.json()["fields"]


def test_a_well_formed_but_impossible_time_filter_is_422(api: APIClient) -> None:
    response = api.get("/api/workflow/meta", {"updated_time_start": "2026-13-01T00:00:00Z"})

    assert response.status_code == 422
    assert "updated_time_start" in response.json()["fields"]


def test_earlier_route_set_reads_by_id(api: APIClient, created: dict) -> None:
    response = api.get(f"/api/workflow/{created['resource_id']}")
    assert response.status_code == 200
    assert response.json()["name"] == "build"


def test_updated_by_tracks_the_caller(api: APIClient, created: dict) -> None:
    rid = created["resource_id"]
    response = api.patch(
        f"/api/workflow/{rid}", [{"op": "replace", "path": "/name", "value": "b"}], format="json", HTTP_X_USER_ID="bob"
    )
    assert response.json()["updated_by"] == "bob"
    assert response.json()["created_by"] == "alice"
