"""Per-user limits: override then site default, the 5 s memo, and the staff-only override endpoints."""

from __future__ import annotations

import pytest

from quotas import services
from quotas.limits import limits_for
from quotas.models import UserResourceOverride
from quotas.values import OverrideValues, UserLimits
from tests.fixtures.quotas import GIB, MIB

pytestmark = pytest.mark.django_db
URL = "/admin/user-resources"


@pytest.fixture
def staff(settings, api_client_for):
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    return api_client_for("alice")


def test_site_defaults_apply_without_an_override(per_user):
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    assert limits_for("bob") == UserLimits(count=3, cpu=2.0, memory=GIB, disk=10 * GIB)


def test_zero_and_empty_site_defaults_mean_no_limit(per_user):
    per_user(count=0, cpu=0, memory="", disk="0")
    assert limits_for("bob") == UserLimits()


def test_an_override_wins_per_dimension_and_the_rest_fall_back(per_user):
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    services.override_set(user_id="bob", values=OverrideValues(count=5, disk=20 * GIB), actor="alice")
    assert limits_for("bob") == UserLimits(count=5, cpu=2.0, memory=GIB, disk=20 * GIB)
    assert limits_for("carol") == UserLimits(count=3, cpu=2.0, memory=GIB, disk=10 * GIB)


def test_max_is_unlimited_in_every_dimension(per_user):
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    services.override_set(user_id="bob", values=OverrideValues(count=0, cpu=0, memory=0, disk=0), actor="alice")
    assert limits_for("bob") == UserLimits()


def test_the_writing_instance_sees_a_change_at_once(per_user, clock):
    per_user(count=3)
    assert limits_for("bob").count == 3
    services.override_set(user_id="bob", values=OverrideValues(count=7), actor="alice")
    assert limits_for("bob").count == 7
    services.override_delete(user_id="bob")
    assert limits_for("bob").count == 3


def test_other_instances_see_a_change_within_five_seconds(per_user, clock):
    per_user(count=3)
    assert limits_for("bob").count == 3
    # Another instance writes the row: this process does not hear of it and keeps its memo.
    UserResourceOverride.objects.create(user_id="bob", count=9)
    clock.advance(seconds=4.9)
    assert limits_for("bob").count == 3
    clock.advance(seconds=0.1)
    assert limits_for("bob").count == 9


def test_the_memo_reads_the_database_once_per_five_seconds(per_user, clock, django_assert_num_queries):
    per_user(count=3)
    with django_assert_num_queries(1):
        for _ in range(20):
            limits_for("bob")
    clock.advance(seconds=5)
    with django_assert_num_queries(1):
        limits_for("bob")


def test_an_override_changes_what_the_gate_admits(per_user, alice_api, make_item):
    per_user(count=1)
    services.override_set(user_id="alice", values=OverrideValues(count=2), actor="alice")
    statuses = [
        alice_api.post(f"/a/notebook/items/{make_item().pk}/exec", {"command": "true"}, format="json").status_code
        for _ in range(3)
    ]
    assert statuses == [200, 200, 507]


# The staff endpoints.


def test_listing_shows_defaults_and_overrides_sorted_by_user(per_user, staff):
    per_user(count=3, memory="1G")
    staff.put(f"{URL}/carol", {"disk": "max"}, format="json")
    staff.put(f"{URL}/bob", {"count": 5}, format="json")
    body = staff.get(URL).json()
    assert body["defaults"] == {"count": 3, "cpu": None, "memory": GIB, "disk": None}
    assert [row["user_id"] for row in body["overrides"]] == ["bob", "carol"]
    assert body["overrides"][1]["disk"] == "max"


def test_put_stores_and_returns_the_override_and_the_result(per_user, staff):
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    response = staff.put(f"{URL}/bob", {"count": 4, "cpu": 1.5, "memory": "512M", "disk": "max"}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["override"] == {"count": 4, "cpu": 1.5, "memory": 512 * MIB, "disk": "max"}
    assert body["effective"] == {"count": 4, "cpu": 1.5, "memory": 512 * MIB, "disk": None}
    assert staff.get(f"{URL}/bob").json() == body
    assert UserResourceOverride.objects.get(user_id="bob").updated_by == "alice"


def test_put_replaces_and_a_missing_or_null_dimension_falls_back(per_user, staff):
    per_user(count=3)
    staff.put(f"{URL}/bob", {"count": 4, "memory": "1G"}, format="json")
    body = staff.put(f"{URL}/bob", {"memory": None}, format="json").json()
    assert body["override"] == {"count": None, "cpu": None, "memory": None, "disk": None}
    assert body["effective"]["count"] == 3


def test_count_and_cpu_zero_mean_the_site_default_and_max_means_unlimited(per_user, staff):
    per_user(count=3, cpu=2)
    assert staff.put(f"{URL}/bob", {"count": 0, "cpu": 0}, format="json").json()["effective"]["count"] == 3
    body = staff.put(f"{URL}/bob", {"count": "max", "cpu": "max"}, format="json").json()
    assert (body["effective"]["count"], body["effective"]["cpu"]) == (None, None)


def test_delete_reverts_to_the_defaults(per_user, staff):
    per_user(count=3)
    staff.put(f"{URL}/bob", {"count": 9}, format="json")
    assert staff.delete(f"{URL}/bob").status_code == 204
    assert staff.get(f"{URL}/bob").json()["override"] is None
    assert limits_for("bob").count == 3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"count": -1}, "count"),
        ({"count": 1.5}, "count"),
        ({"count": "lots"}, "count"),
        ({"count": True}, "count"),
        ({"cpu": -0.5}, "cpu"),
        ({"cpu": "fast"}, "cpu"),
        ({"memory": "12X"}, "memory"),
        ({"memory": -5}, "memory"),
        ({"disk": "1.5G"}, "disk"),
        ({"disk": ["1G"]}, "disk"),
        ({"swap": "1G"}, "swap"),
    ],
)
def test_bad_values_are_400_naming_the_field_and_change_nothing(staff, body, field):
    staff.put(f"{URL}/bob", {"count": 2}, format="json")
    response = staff.put(f"{URL}/bob", body, format="json")
    assert response.status_code == 400
    payload = response.json()
    assert payload["error"] == "validation_error"
    assert field in payload["fields"]
    assert field in payload["detail"]
    assert UserResourceOverride.objects.get(user_id="bob").count == 2


def test_a_body_that_is_not_an_object_is_400(staff):
    assert staff.put(f"{URL}/bob", [1, 2], format="json").status_code == 400
    assert staff.put(f"{URL}/bob", "{oops", content_type="application/json").status_code == 400
    assert not UserResourceOverride.objects.exists()


def test_an_unknown_user_is_404(staff):
    assert staff.get(f"{URL}/mallory").status_code == 404
    assert staff.put(f"{URL}/mallory", {"count": 1}, format="json").status_code == 404
    assert not UserResourceOverride.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_non_staff_get_404_on_every_override_endpoint(settings, bob_api, method):
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    response = getattr(bob_api, method)(f"{URL}/bob", {"count": 99}, format="json")
    assert response.status_code == 404
    assert bob_api.get(URL).status_code == 404
    assert not UserResourceOverride.objects.exists()


def test_the_override_routes_are_matched_before_django_admin(staff):
    assert staff.get(URL)["Content-Type"].startswith("application/json")


def test_admin_edits_overrides_with_the_same_syntax(settings, per_user, admin_client):
    per_user(count=3)
    response = admin_client.post(
        "/admin/quotas/userresourceoverride/add/",
        {"user_id": "bob", "count": "max", "cpu": "", "memory": "2G", "disk": "0"},
    )
    assert response.status_code == 302, response.content
    row = UserResourceOverride.objects.get(user_id="bob")
    assert (row.count, row.cpu, row.memory, row.disk) == (0, None, 2 * GIB, 0)
    assert limits_for("bob") == UserLimits(count=None, memory=2 * GIB)
    bad = admin_client.post(
        "/admin/quotas/userresourceoverride/add/", {"user_id": "carol", "count": "-3", "memory": "2Q"}
    )
    assert bad.status_code == 200
    assert not UserResourceOverride.objects.filter(user_id="carol").exists()
