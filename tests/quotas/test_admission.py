"""The sandbox admission gate: each dimension refusing alone, the edges, and which paths it guards."""

from __future__ import annotations

import tomllib

import pytest
from django.db import connection

from collab.errors import QuotaExceeded
from quotas import ledger, services
from quotas.models import SandboxActivity
from tests.fixtures.items import item_url
from tests.fixtures.quotas import GIB, MIB
from workspace.items.config import DEFAULT_CONFIG, get_config
from workspace.items.models import Item

pytestmark = pytest.mark.django_db


def _exec(api, item, command="true"):
    return api.post(item_url(item, "/exec"), {"command": command}, format="json")


def _fill(api, items):
    for item in items:
        assert _exec(api, item).status_code == 200


def test_sandbox_count_alone_refuses(per_user, alice_api, make_item):
    # Given alice may run two sandboxes, with cpu and memory to spare, and runs two
    per_user(count=2, cpu=10, memory="10G")
    _fill(alice_api, [make_item(), make_item()])
    # When she runs a command in a third notebook
    response = _exec(alice_api, make_item())
    # Then it is 507 naming the sandboxes limit alone, used and limit both 2, with no Retry-After
    assert response.status_code == 507
    body = response.json()
    assert (body["error"], body["dimension"], body["used"], body["limit"]) == (
        "sandbox_quota_exceeded",
        "sandboxes",
        2,
        2,
    )
    assert "also" not in body
    assert "sandboxes limit" in body["detail"]
    assert "Retry-After" not in response.headers


def test_cpu_alone_refuses(per_user, alice_api, make_item):
    # Given alice may use 2 cpu, with count and memory to spare, and two 1-cpu notebooks use them
    per_user(count=10, cpu=2, memory="10G")
    _fill(alice_api, [make_item(), make_item()])
    # When she runs a command in a third
    body = _exec(alice_api, make_item()).json()
    # Then it is refused on cpu alone, 2 used of 2
    assert (body["error"], body["dimension"], body["used"], body["limit"]) == (
        "sandbox_quota_exceeded",
        "cpu",
        2.0,
        2.0,
    )
    assert "also" not in body


def test_memory_alone_refuses(per_user, alice_api, make_item):
    # Given alice may use 1G of memory, with count and cpu to spare, and two 512M notebooks use it
    per_user(count=10, cpu=10, memory="1G")
    _fill(alice_api, [make_item(), make_item()])
    # When she runs a command in a third
    response = _exec(alice_api, make_item())
    # Then it is 507 on memory alone, naming what is used, the limit and what the notebook asks
    assert response.status_code == 507
    body = response.json()
    assert (body["dimension"], body["used"], body["limit"], body["requested"]) == ("memory", GIB, GIB, 512 * MIB)
    assert "also" not in body


def test_exactly_at_each_limit_is_admitted(per_user, alice_api, make_item):
    # Given alice's limits of 2 sandboxes, 2 cpu and 1G, exactly what two notebooks take
    per_user(count=2, cpu=2, memory="1G")
    first, second = make_item(), make_item()
    # When she opens both / Then both are admitted
    _fill(alice_api, [first, second])
    # Then both are live
    assert ledger.live_rows_of_payer("alice").count() == 2


def test_when_several_limits_bind_the_first_is_named_and_the_others_listed(per_user, alice_api, make_item):
    # Given alice may run one notebook's worth of everything, and runs one
    per_user(count=1, cpu=1, memory="512M")
    _fill(alice_api, [make_item()])
    # When she runs a command in a second
    body = _exec(alice_api, make_item()).json()
    # Then the refusal names the sandboxes limit and lists cpu and memory as also exceeded
    assert body["dimension"] == "sandboxes"
    assert [(other["error"], other["dimension"]) for other in body["also"]] == [
        ("sandbox_quota_exceeded", "cpu"),
        ("sandbox_quota_exceeded", "memory"),
    ]


def test_an_item_with_a_live_sandbox_is_always_admitted(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    item = make_item()
    _fill(alice_api, [item])
    # When she runs another command in the same item
    response = _exec(alice_api, item, "echo again")
    # Then it runs in the live sandbox without a new one being admitted
    assert (response.status_code, response.json()["sandbox_opened"]) == (200, False)


def test_a_refused_open_records_nothing(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    _fill(alice_api, [make_item()])
    refused = make_item()
    # When she runs a command in another item / Then it is 507
    assert _exec(alice_api, refused).status_code == 507
    # Then no sandbox is recorded for that item
    assert not SandboxActivity.objects.filter(item_id=str(refused.pk)).exists()


def test_closed_sandboxes_free_capacity_without_a_decrement(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    first = make_item()
    _fill(alice_api, [first])
    # When she closes it / Then it is 204
    assert alice_api.delete(item_url(first, "/sandbox")).status_code == 204
    # When she runs a command in another item / Then it is admitted
    assert _exec(alice_api, make_item()).status_code == 200
    # Then the closed row is kept, soft-deleted
    assert SandboxActivity.objects.filter(is_deleted=True).count() == 1  # soft-deleted, still listed


def test_expired_evidence_is_not_counted(per_user, alice_api, make_item, clock):
    # Given alice may run one sandbox, whose row is still open though its lease ran out 91 s ago
    per_user(count=1)
    _fill(alice_api, [make_item()])
    clock.advance(seconds=91)  # past the 90 s lease: the row is still open but no longer live
    assert SandboxActivity.current.count() == 1
    # When she runs a command in another item / Then it is admitted: expired evidence counts for nothing
    assert _exec(alice_api, make_item()).status_code == 200


def test_the_debtor_is_the_items_owner_not_its_creator(per_user, alice_api, make_item):
    # Given everyone may run one sandbox, and one runs in an item alice created and bob pays for
    per_user(count=1)
    _fill(alice_api, [make_item(created_by="alice", owner="bob")])
    # When alice runs a command in her own item / Then it opens: she pays for nothing yet
    assert _exec(alice_api, make_item()).status_code == 200
    # When she runs one in another item bob pays for
    body = _exec(alice_api, make_item(created_by="alice", owner="bob")).json()
    # Then it is refused on bob's sandboxes limit, naming him
    assert (body["dimension"], body["owner"]) == ("sandboxes", "bob")


def test_apps_that_declare_no_cost_are_bound_by_count_only(per_user, alice_api, make_item):
    # Given alice may run three sandboxes and one notebook's worth of cpu and memory, which a notebook uses,
    # and two rca items run beside it
    per_user(count=3, cpu=1, memory="512M")
    _fill(alice_api, [make_item()])  # a notebook takes the whole cpu and memory allowance
    _fill(alice_api, [make_item(app_slug="rca"), make_item(app_slug="rca")])  # rca declares nothing
    # When she runs a command in a third rca item
    body = _exec(alice_api, make_item(app_slug="rca")).json()
    # Then it is refused on the count alone
    assert body["dimension"] == "sandboxes"


def test_costless_sandboxes_add_nothing_to_the_cpu_and_memory_sums(per_user, alice_api, make_item):
    # Given alice may use one notebook's worth of cpu and memory, and two rca sandboxes run
    per_user(cpu=1, memory="512M")
    _fill(alice_api, [make_item(app_slug="rca"), make_item(app_slug="rca")])
    # When she runs a command in a notebook / Then it is admitted: the rca sandboxes cost nothing
    assert _exec(alice_api, make_item()).status_code == 200


def _notebook_size():
    return get_config().app("notebook").resources.sandbox


def test_no_limit_means_the_gate_costs_no_query(make_item, django_assert_num_queries, write_config):
    # Given no per-user limit, and the 5 s override memo warmed by a first gate
    write_config("")
    item = make_item()
    services.sandbox_admit(payer=item.payer, incoming=_notebook_size())
    # When the gate runs again / Then it reads nothing at all
    with django_assert_num_queries(0):
        services.sandbox_admit(payer=item.payer, incoming=_notebook_size())


def test_with_limits_the_gate_is_one_aggregate_query(per_user, make_item, django_assert_num_queries):
    # Given per-user limits on every dimension, and the override memo warmed
    per_user(count=5, cpu=5, memory="5G")
    item = make_item()
    services.sandbox_admit(payer=item.payer, incoming=_notebook_size())
    # When the gate runs again
    # (the owner's lock on PostgreSQL only, since SQLite serialises writers; then the sums)
    expected = 2 if connection.features.has_select_for_update else 1
    with django_assert_num_queries(expected) as captured:
        services.sandbox_admit(payer=item.payer, incoming=_notebook_size())
    # Then its last statement is the one aggregate over the owner's live rows (on PostgreSQL the
    # session's prepared statement of it)
    gate = captured.captured_queries[-1]["sql"]
    if connection.vendor == "postgresql":
        assert gate.startswith("EXECUTE quotas_payer_sandbox_usage(")
    else:
        assert gate.startswith("SELECT COUNT(")
        assert "SUM(" in gate


def test_a_refusing_gate_stores_nothing(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    _fill(alice_api, [make_item()])
    item = make_item()
    # When the gate alone is asked about another item's new sandbox
    with pytest.raises(QuotaExceeded) as refused:
        services.sandbox_admit(payer=item.payer, incoming=_notebook_size())
    # Then it refuses with the sandbox quota error (no HTTP status: the edge maps it) and no ledger row is written
    assert refused.value.error == "sandbox_quota_exceeded"
    assert not hasattr(refused.value, "status_code")
    assert SandboxActivity.objects.count() == 1


def test_item_open_browse_and_upload_are_never_gated(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    _fill(alice_api, [make_item()])
    item = make_item()
    # When she opens another item, lists and writes its files, reads one and sends a batch / Then each is 200
    assert alice_api.get(item_url(item)).status_code == 200
    assert alice_api.get(item_url(item, "/files")).status_code == 200
    put = alice_api.put(item_url(item, "/files/a.txt"), b"hello", content_type="application/octet-stream")
    assert put.status_code == 200
    assert alice_api.get(item_url(item, "/files/a.txt")).status_code == 200
    batch = {"operations": [{"op": "stage", "path": "b.txt", "content": "x"}]}
    assert alice_api.post(item_url(item, "/files:batch"), batch, format="json").status_code == 200
    # Then no sandbox is recorded for that item
    assert not SandboxActivity.objects.filter(item_id=str(item.pk)).exists()


def test_exec_refusal_on_the_item_page_flow_is_json_for_fetch(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    _fill(alice_api, [make_item()])
    # When the item page's script runs a command in another item, asking for JSON
    response = alice_api.post(
        item_url(make_item(), "/exec"), {"command": "ls"}, format="json", HTTP_ACCEPT="application/json"
    )
    # Then the 507 comes back as JSON
    assert response.status_code == 507
    assert response["Content-Type"].startswith("application/json")


def test_only_the_creator_or_staff_can_move_the_debt(per_user, alice_api, bob_api, make_item):
    # Given alice's notebook, with everyone allowed one sandbox
    per_user(count=1)
    item = make_item(created_by="alice")
    # When bob, who cannot see it, names carol as its owner / Then it is 404
    assert bob_api.patch(item_url(item), {"owner": "carol"}, format="json").status_code == 404
    # Then alice still pays
    item.refresh_from_db()
    assert item.payer == "alice"
    # When alice names bob / Then he is only asked
    assert alice_api.patch(item_url(item), {"owner": "bob"}, format="json").json()["pending_owner"] == "bob"
    # When bob accepts / Then he pays
    assert bob_api.post(f"/me/resources/handovers/{item.pk}/accept").json()["owner"] == "bob"


def test_commands_in_an_item_waiting_for_consent_count_against_the_creator_only(per_user, bob_api, api_client_for):
    # Given carol may run one sandbox, and bob's item names her as owner
    per_user(count=1)
    body = bob_api.post("/a/notebook/items", {"title": "Mine", "owner": "carol"}, format="json").json()
    # When bob runs a command in it
    bob_api.post(item_url(Item.objects.get(pk=body["id"]), "/exec"), {"command": "true"}, format="json")
    # Then the sandbox is billed to bob, and carol's own item still opens a sandbox
    assert list(SandboxActivity.objects.values_list("owner", flat=True)) == ["bob"]
    carol = api_client_for("carol")
    own = carol.post("/a/notebook/items", {"title": "Hers"}, format="json").json()
    answer = carol.post(item_url(Item.objects.get(pk=own["id"]), "/exec"), {"command": "true"}, format="json")
    assert answer.status_code == 200


def test_with_the_demos_limits_three_notebooks_open_and_a_fourth_meets_the_sandbox_count(
    per_user, alice_api, make_item
):
    # Given the per-user limits `make run` uses (workspace/demo.toml)
    demo = tomllib.loads((DEFAULT_CONFIG.parent / "demo.toml").read_text())["resources"]["per_user"]
    per_user(count=demo["count"], cpu=demo["cpu"], memory=demo["memory"])

    # When alice runs a command in three notebooks, then in a fourth
    _fill(alice_api, [make_item(), make_item(), make_item()])
    body = _exec(alice_api, make_item()).json()

    # Then the three ran (no cpu or memory limit bound before the count), and the fourth is refused
    # naming the sandboxes limit the page shows as "3 of 3"
    assert (body["dimension"], body["used"], body["limit"]) == ("sandboxes", 3, 3)
