"""Per-user limits: override then site default, the 5 s memo, and the staff-only override endpoints."""

from __future__ import annotations

import pytest
from django.http import Http404

from collab.actor import Actor
from quotas import services
from quotas.limits import limits_for
from quotas.models import UserResourceOverride
from quotas.values import OverrideValues, UserLimits
from tests.fixtures.quotas import GIB, MIB

pytestmark = pytest.mark.django_db
URL = "/admin/user-resources"
STAFF = Actor("alice", is_staff=True)


@pytest.fixture
def staff(settings, api_client_for):
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    return api_client_for("alice")


def test_site_defaults_apply_without_an_override(per_user):
    # Given site defaults for every dimension, and no override for bob
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    # When bob's limits are read / Then they are the site defaults
    assert limits_for("bob") == UserLimits(count=3, cpu=2.0, memory=GIB, disk=10 * GIB)


def test_zero_and_empty_site_defaults_mean_no_limit(per_user):
    # Given site defaults of zero or empty in every dimension
    per_user(count=0, cpu=0, memory="", disk="0")
    # When bob's limits are read / Then he has no limit at all
    assert limits_for("bob") == UserLimits()


def test_an_override_wins_per_dimension_and_the_rest_fall_back(per_user):
    # Given site defaults for every dimension
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    # When staff override bob's count and disk
    services.override_set(user_id="bob", values=OverrideValues(count=5, disk=20 * GIB), actor=STAFF)
    # Then bob gets those two and the defaults for the rest, and carol keeps the defaults
    assert limits_for("bob") == UserLimits(count=5, cpu=2.0, memory=GIB, disk=20 * GIB)
    assert limits_for("carol") == UserLimits(count=3, cpu=2.0, memory=GIB, disk=10 * GIB)


def test_max_is_unlimited_in_every_dimension(per_user):
    # Given site defaults for every dimension
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    # When staff override bob with max in every dimension
    services.override_set(user_id="bob", values=OverrideValues(count=0, cpu=0, memory=0, disk=0), actor=STAFF)
    # Then he has no limit at all
    assert limits_for("bob") == UserLimits()


def test_the_writing_instance_sees_a_change_at_once(per_user, clock):
    # Given a site default count of 3, read by this process
    per_user(count=3)
    assert limits_for("bob").count == 3
    # When this process overrides bob's count with 7
    services.override_set(user_id="bob", values=OverrideValues(count=7), actor=STAFF)
    # Then it reads 7 at once
    assert limits_for("bob").count == 7
    # When it deletes the override
    services.override_delete(user_id="bob", actor=STAFF)
    # Then it reads 3 at once
    assert limits_for("bob").count == 3


def test_the_override_service_refuses_someone_not_staff_by_itself(per_user):
    # Given site defaults, and staff's override of bob's count
    per_user(count=3)
    services.override_set(user_id="bob", values=OverrideValues(count=7), actor=STAFF)

    # When bob, not staff, calls the services directly (no view, no admin in between)
    with pytest.raises(Http404):
        services.override_set(user_id="bob", values=OverrideValues(count=99), actor=Actor("bob"))
    with pytest.raises(Http404):
        services.override_delete(user_id="bob", actor=Actor("bob"))

    # Then both are refused as not there, and his override is as staff left it
    assert UserResourceOverride.objects.get(user_id="bob").count == 7
    assert limits_for("bob").count == 7


def test_other_instances_see_a_change_within_five_seconds(per_user, clock):
    # Given a site default count of 3, read by this process
    per_user(count=3)
    assert limits_for("bob").count == 3
    # When another instance writes an override of 9: this process does not hear of it and keeps its memo
    UserResourceOverride.objects.create(user_id="bob", count=9)
    # Then 4.9 s later it still reads 3
    clock.advance(seconds=4.9)
    assert limits_for("bob").count == 3
    # Then at 5 s it reads 9
    clock.advance(seconds=0.1)
    assert limits_for("bob").count == 9


def test_the_memo_reads_the_database_once_per_five_seconds(per_user, clock, django_assert_num_queries):
    # Given a site default count for bob
    per_user(count=3)
    # When his limits are read twenty times / Then one query answers them all
    with django_assert_num_queries(1):
        for _ in range(20):
            limits_for("bob")
    # When five seconds pass
    clock.advance(seconds=5)
    # Then the next read queries again
    with django_assert_num_queries(1):
        limits_for("bob")


def test_an_override_changes_what_the_gate_admits(per_user, alice_api, make_item):
    # Given a site default count of 1, and alice's override of 2
    per_user(count=1)
    services.override_set(user_id="alice", values=OverrideValues(count=2), actor=STAFF)
    # When she runs commands in three notebooks
    statuses = [
        alice_api.post(f"/a/notebook/items/{make_item().pk}/exec", {"command": "true"}, format="json").status_code
        for _ in range(3)
    ]
    # Then two are admitted and the third refused
    assert statuses == [200, 200, 507]


# The staff endpoints.


def test_listing_shows_defaults_and_overrides_sorted_by_user(per_user, staff):
    # Given site defaults, and staff overrides for carol's disk and bob's count
    per_user(count=3, memory="1G")
    staff.put(f"{URL}/carol", {"disk": "max"}, format="json")
    staff.put(f"{URL}/bob", {"count": 5}, format="json")
    # When staff list the overrides
    body = staff.get(URL).json()
    # Then the defaults come with the overrides, sorted by user, unlimited shown as max
    assert body["defaults"] == {"count": 3, "cpu": None, "memory": GIB, "disk": None}
    assert [row["user_id"] for row in body["overrides"]] == ["bob", "carol"]
    assert body["overrides"][1]["disk"] == "max"


def test_put_stores_and_returns_the_override_and_the_result(per_user, staff):
    # Given site defaults for every dimension
    per_user(count=3, cpu=2, memory="1G", disk="10G")
    # When staff put an override for bob in every dimension
    response = staff.put(f"{URL}/bob", {"count": 4, "cpu": 1.5, "memory": "512M", "disk": "max"}, format="json")
    # Then it is stored and returned with the limits bob now has, and reads back the same, alice its editor
    assert response.status_code == 200
    body = response.json()
    assert body["override"] == {"count": 4, "cpu": 1.5, "memory": 512 * MIB, "disk": "max"}
    assert body["effective"] == {"count": 4, "cpu": 1.5, "memory": 512 * MIB, "disk": None}
    assert staff.get(f"{URL}/bob").json() == body
    assert UserResourceOverride.objects.get(user_id="bob").updated_by == "alice"


def test_put_replaces_and_a_missing_or_null_dimension_falls_back(per_user, staff):
    # Given a site default count of 3, and bob's override of count and memory
    per_user(count=3)
    staff.put(f"{URL}/bob", {"count": 4, "memory": "1G"}, format="json")
    # When staff put an override holding only a null memory
    body = staff.put(f"{URL}/bob", {"memory": None}, format="json").json()
    # Then the whole override is replaced: nothing is left of it and bob's count falls back to 3
    assert body["override"] == {"count": None, "cpu": None, "memory": None, "disk": None}
    assert body["effective"]["count"] == 3


def test_count_and_cpu_zero_mean_the_site_default_and_max_means_unlimited(per_user, staff):
    # Given site defaults for count and cpu
    per_user(count=3, cpu=2)
    # When staff override bob's count and cpu with 0 / Then he gets the site default count
    assert staff.put(f"{URL}/bob", {"count": 0, "cpu": 0}, format="json").json()["effective"]["count"] == 3
    # When they override both with max
    body = staff.put(f"{URL}/bob", {"count": "max", "cpu": "max"}, format="json").json()
    # Then he has no count or cpu limit
    assert (body["effective"]["count"], body["effective"]["cpu"]) == (None, None)


def test_delete_reverts_to_the_defaults(per_user, staff):
    # Given a site default count of 3, and staff's override of 9 for bob
    per_user(count=3)
    staff.put(f"{URL}/bob", {"count": 9}, format="json")
    # When staff delete bob's override / Then it is 204
    assert staff.delete(f"{URL}/bob").status_code == 204
    # Then bob has no override and his count is the default again
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
        # Past what a column or a float holds (issue 25.15: a 400-digit memory was a 500 on SQLite)
        ({"memory": 10**400}, "memory"),
        ({"memory": "9" * 400}, "memory"),
        ({"disk": 2**63}, "disk"),
        ({"disk": "8388608T"}, "disk"),
        ({"count": 10**400}, "count"),
        ({"count": 2**31}, "count"),
        ({"cpu": 10**400}, "cpu"),
        ({"cpu": 1e300}, "cpu"),
        ({"cpu": "1" + "0" * 400}, "cpu"),
    ],
)
def test_bad_values_are_400_naming_the_field_and_change_nothing(staff, body, field):
    # Given bob's override of count 2
    staff.put(f"{URL}/bob", {"count": 2}, format="json")
    # When staff put a value that is negative, fractional, ill-typed, ill-sized or of an unknown field
    response = staff.put(f"{URL}/bob", body, format="json")
    # Then it is 400 naming the field, and bob's override is unchanged
    assert response.status_code == 400
    payload = response.json()
    assert payload["error"] == "validation_error"
    assert field in payload["fields"]
    assert field in payload["detail"]
    assert UserResourceOverride.objects.get(user_id="bob").count == 2


def test_the_largest_values_the_columns_hold_are_taken(staff):
    # Given alice, staff
    # When she puts the largest count, cpu, memory and disk an override takes
    biggest = {"count": 2**31 - 1, "cpu": 1_000_000, "memory": 2**63 - 1, "disk": 8388607 * 1024**4}
    response = staff.put(f"{URL}/bob", biggest, format="json")
    # Then they are stored as given
    assert response.status_code == 200
    row = UserResourceOverride.objects.get(user_id="bob")
    assert (row.count, row.cpu, row.memory, row.disk) == (2**31 - 1, 1_000_000, 2**63 - 1, 8388607 * 1024**4)


@pytest.mark.parametrize(
    ("body", "field"),
    [({"disk": "8388607T"}, "disk"), ({"memory": "1234567"}, "memory"), ({"count": "1234567890"}, "count")],
)
def test_a_string_longer_than_the_document_allows_is_refused_though_it_would_parse(staff, body, field):
    # Given bob's override of count 2, and the document's size strings of at most six digits (nine
    # for a count): a number says more, and any unit keeps six digits under the largest size
    staff.put(f"{URL}/bob", {"count": 2}, format="json")
    # When staff put a string with more digits, which the size parser would read
    response = staff.put(f"{URL}/bob", body, format="json")
    # Then it is 400 naming the field, as the document says, and nothing changed
    assert response.status_code == 400
    assert field in response.json()["fields"]
    assert UserResourceOverride.objects.get(user_id="bob").count == 2


@pytest.mark.parametrize("value", ["512M", " 999999T ", "MAX", "", "16 GiB"])
def test_a_size_string_the_document_offers_is_taken(staff, value):
    # Given alice, staff / When she puts a size string the document's pattern allows
    response = staff.put(f"{URL}/bob", {"memory": value}, format="json")
    # Then it is stored
    assert response.status_code == 200, response.content


def test_a_body_that_is_not_an_object_is_400(staff):
    # Given alice, staff, with no override stored
    # When they put a JSON list / Then it is 400
    assert staff.put(f"{URL}/bob", [1, 2], format="json").status_code == 400
    # When they put broken JSON / Then it is 400 too
    assert staff.put(f"{URL}/bob", "{oops", content_type="application/json").status_code == 400
    # Then nothing is stored
    assert not UserResourceOverride.objects.exists()


def test_an_unknown_user_is_404(staff):
    # Given mallory, who is not in the directory
    # When staff read her override / Then it is 404
    assert staff.get(f"{URL}/mallory").status_code == 404
    # When they put one / Then it is 404 too
    assert staff.put(f"{URL}/mallory", {"count": 1}, format="json").status_code == 404
    # Then nothing is stored
    assert not UserResourceOverride.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "delete"])
def test_non_staff_get_404_on_every_override_endpoint(settings, bob_api, method):
    # Given alice is staff and bob is not
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    # When bob reads, puts or deletes his own override
    response = getattr(bob_api, method)(f"{URL}/bob", {"count": 99}, format="json")
    # Then it is 404, the list is 404 too, and nothing is stored
    assert response.status_code == 404
    assert bob_api.get(URL).status_code == 404
    assert not UserResourceOverride.objects.exists()


def test_the_override_routes_are_matched_before_django_admin(staff):
    # Given alice, staff, and the override API under /admin/, where Django admin lives too
    # When they read the overrides at the path Django admin lives under / Then the override API answers in JSON
    assert staff.get(URL)["Content-Type"].startswith("application/json")


def test_admin_edits_overrides_with_the_same_syntax(settings, per_user, admin_client):
    # Given a site default count of 3, and staff in Django admin
    per_user(count=3)
    # When they add bob's override with max, an empty cpu, 2G of memory and a disk of 0
    response = admin_client.post(
        "/admin/quotas/userresourceoverride/add/",
        {"user_id": "bob", "count": "max", "cpu": "", "memory": "2G", "disk": "0"},
    )
    # Then it is stored as the API stores it, and bob's limits follow
    assert response.status_code == 302, response.content
    row = UserResourceOverride.objects.get(user_id="bob")
    assert (row.count, row.cpu, row.memory, row.disk) == (0, None, 2 * GIB, 0)
    assert limits_for("bob") == UserLimits(count=None, memory=2 * GIB)
    # When they add carol's override with a negative count and a memory of 2Q
    bad = admin_client.post(
        "/admin/quotas/userresourceoverride/add/", {"user_id": "carol", "count": "-3", "memory": "2Q"}
    )
    # Then the form is shown again and nothing is stored for carol
    assert bad.status_code == 200
    assert not UserResourceOverride.objects.filter(user_id="carol").exists()


def test_admin_refuses_a_value_past_what_the_column_holds(admin_client):
    # Given staff in Django admin
    # When they add bob's override with a 400-digit memory and count
    response = admin_client.post(
        "/admin/quotas/userresourceoverride/add/", {"user_id": "bob", "count": "9" * 400, "memory": "9" * 400}
    )
    # Then the form comes back saying how large a size may be, and nothing is stored
    assert response.status_code == 200
    assert "8 EiB" in response.content.decode()
    assert not UserResourceOverride.objects.exists()
