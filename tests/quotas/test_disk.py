"""Disk quotas: the item's app limit (exact) and the owner's total (from the ledger), on every growing write."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from quotas import services
from quotas.disk import item_facts
from quotas.models import WorkspaceDiskUsage
from quotas.values import OverrideValues
from tests.fixtures.items import item_url
from workspace.items.filestore import workspace_dir

pytestmark = pytest.mark.django_db


def _put(api, item, path, data: bytes):
    return api.put(item_url(item, f"/files/{path}"), data, content_type="application/octet-stream")


def _measured(item, owner, size):
    WorkspaceDiskUsage.objects.update_or_create(
        item_id=str(item.pk), defaults={"app_slug": item.app_slug, "owner": owner, "bytes": size}
    )


def test_workspace_disk_alone_refuses(per_user, alice_api, make_item):
    per_user(workspace_quota="1K", disk="1G")
    item = make_item()
    assert _put(alice_api, item, "a.bin", b"x" * 1000).status_code == 200
    response = _put(alice_api, item, "b.bin", b"y" * 25)
    assert response.status_code == 507
    body = response.json()
    assert (body["error"], body["used"], body["quota"], body["attempted"]) == (
        "workspace_quota_exceeded",
        1000,
        1024,
        1025,
    )
    assert "also" not in body
    assert "Retry-After" not in response.headers
    assert not (workspace_dir(item.pk) / "b.bin").exists()


def test_user_disk_alone_refuses(per_user, alice_api, make_item):
    per_user(workspace_quota="1G", disk="2K")
    other, item = make_item(), make_item()
    _measured(other, "alice", 1500)
    assert _put(alice_api, item, "a.bin", b"x" * 500).status_code == 200
    response = _put(alice_api, item, "b.bin", b"y" * 49)
    assert response.status_code == 507
    body = response.json()
    assert (body["error"], body["used"], body["quota"], body["attempted"]) == ("user_quota_exceeded", 2000, 2048, 2049)
    assert "also" not in body


def test_exactly_at_either_disk_limit_is_admitted(per_user, alice_api, make_item):
    per_user(workspace_quota="1K", disk="2K")
    other, item = make_item(), make_item()
    _measured(other, "alice", 1024)
    assert _put(alice_api, item, "a.bin", b"x" * 1024).status_code == 200
    assert _put(alice_api, item, "b.bin", b"y").status_code == 507


def test_both_disk_limits_binding_name_the_workspace_first(per_user, alice_api, make_item):
    per_user(workspace_quota="1K", disk="1K")
    body = _put(alice_api, make_item(), "a.bin", b"x" * 2000).json()
    assert body["error"] == "workspace_quota_exceeded"
    assert [other["error"] for other in body["also"]] == ["user_quota_exceeded"]


def test_the_item_itself_counts_at_its_live_size_not_its_last_measurement(per_user, alice_api, make_item):
    per_user(disk="2K")
    item = make_item()
    _measured(item, "alice", 1_000_000)  # stale: the workspace is empty now
    assert _put(alice_api, item, "a.bin", b"x" * 2048).status_code == 200


def test_the_debtor_of_disk_is_the_owner(per_user, alice_api, make_item):
    per_user(disk="1K")
    _measured(make_item(owner="bob"), "bob", 1024)
    assert _put(alice_api, make_item(), "mine.bin", b"x" * 1000).status_code == 200
    body = _put(alice_api, make_item(owner="bob"), "bobs.bin", b"x").json()
    assert (body["error"], body["used"]) == ("user_quota_exceeded", 1024)


def test_shrinking_same_size_and_delete_pass_over_quota(per_user, alice_api, make_item):
    per_user(workspace_quota="1G", disk="1G")
    item = make_item()
    assert _put(alice_api, item, "a.bin", b"x" * 3000).status_code == 200
    per_user(workspace_quota="1K", disk="1K")  # now far over both limits
    assert _put(alice_api, item, "a.bin", b"y" * 3000).status_code == 200
    assert _put(alice_api, item, "a.bin", b"z" * 2000).status_code == 200
    assert alice_api.delete(item_url(item, "/files/a.bin")).status_code == 200
    assert not (workspace_dir(item.pk) / "a.bin").exists()


def test_a_refused_overwrite_leaves_the_old_file_intact_and_charges_nothing(per_user, alice_api, make_item):
    per_user(workspace_quota="1K", disk="1G")
    item = make_item()
    _put(alice_api, item, "a.txt", b"old content")
    assert _put(alice_api, item, "a.txt", b"n" * 5000).status_code == 507
    assert (workspace_dir(item.pk) / "a.txt").read_bytes() == b"old content"
    assert [p.name for p in workspace_dir(item.pk).iterdir()] == ["a.txt"]  # no temp file left
    assert not WorkspaceDiskUsage.objects.exists()


def test_the_batch_gate_uses_the_same_limit(per_user, alice_api, make_item):
    per_user(workspace_quota="1K")
    item = make_item()
    fits = {"operations": [{"op": "stage", "path": f"f{n}.txt", "content": "x" * 256} for n in range(4)]}
    assert alice_api.post(item_url(item, "/files:batch"), fits, format="json").status_code == 200
    one_more = {"operations": [{"op": "copy", "from": "f0.txt", "to": "g.txt"}]}
    response = alice_api.post(item_url(item, "/files:batch"), one_more, format="json")
    assert (response.status_code, response.json()["error"]) == (507, "workspace_quota_exceeded")
    assert not (workspace_dir(item.pk) / "g.txt").exists()


def test_an_unlimited_app_disk_checks_only_the_user_total(per_user, alice_api, make_item):
    per_user(workspace_quota="0")  # disk "0" is unlimited; no per-user disk either
    assert _put(alice_api, make_item(), "big.bin", b"x" * 100_000).status_code == 200


def test_an_uploaded_page_file_refused_by_quota_flashes_a_message_linking_my_resources(per_user, client, make_item):
    per_user(workspace_quota="1K")
    item = make_item()
    response = client.post(
        item_url(item, "/files/notes.txt"),
        {"content": "x" * 5000},
        HTTP_ACCEPT="text/html",
        HTTP_X_USER_ID="alice",
        follow=True,
    )
    page = response.content.decode()
    assert "workspace disk limit" in page
    assert 'href="/my-resources"' in page
    assert not (workspace_dir(item.pk) / "notes.txt").exists()


# What a write costs.


def test_with_no_quota_a_write_costs_one_lookup_and_no_ledger_write(
    write_config, alice_api, make_item, django_assert_max_num_queries
):
    write_config("")
    item = make_item()
    _put(alice_api, item, "warm.txt", b"w")  # the 5 s memo of the owner's limits is now warm
    with django_assert_max_num_queries(1) as captured:  # the view's item lookup, nothing else
        assert _put(alice_api, item, "notes.txt", b"hello").status_code == 200
    assert not any("quotas_" in query["sql"] for query in captured.captured_queries)
    assert not WorkspaceDiskUsage.objects.exists()


def test_with_a_user_disk_limit_a_write_adds_one_aggregate_and_no_write(
    per_user, alice_api, make_item, django_assert_max_num_queries
):
    per_user(disk="1G")
    item = make_item()
    _put(alice_api, item, "warm.txt", b"w")
    with django_assert_max_num_queries(2) as captured:
        assert _put(alice_api, item, "notes.txt", b"hello").status_code == 200
    ledger_sql = [q["sql"] for q in captured.captured_queries if "quotas_" in q["sql"]]
    assert len(ledger_sql) == 1
    assert ledger_sql[0].startswith("SELECT SUM(")


# The sweep feeds the ledger only for owners with a disk limit.


def test_the_sweep_writes_the_ledger_only_for_owners_with_a_disk_limit(per_user, make_item):
    per_user(disk="")
    limited, free = make_item(owner="bob"), make_item()
    (workspace_dir(limited.pk) / "a.bin").write_bytes(b"x" * 10)
    services.override_set(user_id="bob", values=OverrideValues(disk=1024), actor="alice")
    call_command("sweep")
    assert list(WorkspaceDiskUsage.objects.values_list("item_id", "owner", "bytes")) == [(str(limited.pk), "bob", 10)]
    assert not WorkspaceDiskUsage.objects.filter(item_id=str(free.pk)).exists()


def test_with_no_disk_quota_anywhere_the_sweep_writes_nothing(write_config, make_item, django_assert_max_num_queries):
    write_config("")
    make_item(), make_item(owner="bob")
    call_command("sweep")
    assert not WorkspaceDiskUsage.objects.exists()


def test_an_owner_change_to_someone_without_a_limit_drops_the_old_charge(per_user, make_item):
    per_user(disk="")
    services.override_set(user_id="bob", values=OverrideValues(disk=1024), actor="alice")
    item = make_item(owner="bob")
    call_command("sweep")
    assert WorkspaceDiskUsage.current.filter(owner="bob").count() == 1
    item.owner = "carol"
    item.save()
    call_command("sweep")
    assert not WorkspaceDiskUsage.current.filter(owner="bob").exists()


def test_the_write_check_memoises_the_item_lookup_for_five_seconds(
    per_user, make_item, clock, django_assert_num_queries
):
    per_user()
    item = make_item(owner="bob")
    with django_assert_num_queries(1):
        for _ in range(10):
            assert (item_facts(str(item.pk)).app_slug, item_facts(str(item.pk)).owner) == ("notebook", "bob")
    clock.advance(seconds=5)
    with django_assert_num_queries(1):
        item_facts(str(item.pk))
