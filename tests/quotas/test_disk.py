"""Disk quotas: the item's app limit (exact) and the owner's total (from the ledger), on every growing write."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from collab.actor import Actor
from quotas import services
from quotas.disk import item_facts
from quotas.models import WorkspaceDiskUsage
from quotas.values import OverrideValues
from tests.fixtures.items import item_url
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db


def _put(api, item, path, data: bytes):
    return api.put(item_url(item, f"/files/{path}"), data, content_type="application/octet-stream")


def _measured(item, owner, size):
    WorkspaceDiskUsage.objects.update_or_create(
        item_id=str(item.pk), defaults={"app_slug": item.app_slug, "owner": owner, "bytes": size}
    )


def test_workspace_disk_alone_refuses(per_user, alice_api, make_item):
    # Given a workspace limit of 1K, a user limit of 1G, and alice's notebook holding 1000 bytes
    per_user(workspace_quota="1K", disk="1G")
    item = make_item()
    assert _put(alice_api, item, "a.bin", b"x" * 1000).status_code == 200
    # When she writes 25 bytes more
    response = _put(alice_api, item, "b.bin", b"y" * 25)
    # Then it is 507 on the workspace alone, naming used, quota and attempted, with no Retry-After, and nothing written
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
    # Given a user limit of 2K, alice's other notebook measured at 1500 bytes, and 500 written into this one
    per_user(workspace_quota="1G", disk="2K")
    other, item = make_item(), make_item()
    _measured(other, "alice", 1500)
    assert _put(alice_api, item, "a.bin", b"x" * 500).status_code == 200
    # When she writes 49 bytes more
    response = _put(alice_api, item, "b.bin", b"y" * 49)
    # Then it is 507 on her user total alone: 2000 used, 2048 allowed, 2049 attempted
    assert response.status_code == 507
    body = response.json()
    assert (body["error"], body["used"], body["quota"], body["attempted"]) == ("user_quota_exceeded", 2000, 2048, 2049)
    assert "also" not in body


def test_a_disk_refusal_is_the_body_the_document_gives_it(per_user, alice_api, make_item, documented_body):
    # Given a workspace limit of 1K and alice's notebook holding 1000 bytes
    per_user(workspace_quota="1K", disk="1G")
    item = make_item()
    assert _put(alice_api, item, "a.bin", b"x" * 1000).status_code == 200
    # When she writes 25 bytes more
    response = _put(alice_api, item, "b.bin", b"y" * 25)
    # Then the 507's body is the disk refusal the OpenAPI document describes, field for field
    documented_body(response, "/a/{slug}/items/{item_id}/files/{file_path}", "put")


def test_exactly_at_either_disk_limit_is_admitted(per_user, alice_api, make_item):
    # Given a workspace limit of 1K, a user limit of 2K, and alice's other notebook measured at 1024 bytes
    per_user(workspace_quota="1K", disk="2K")
    other, item = make_item(), make_item()
    _measured(other, "alice", 1024)
    # When she writes 1024 bytes, filling both limits exactly / Then it is admitted
    assert _put(alice_api, item, "a.bin", b"x" * 1024).status_code == 200
    # When she writes one byte more / Then it is refused
    assert _put(alice_api, item, "b.bin", b"y").status_code == 507


def test_both_disk_limits_binding_name_the_workspace_first(per_user, alice_api, make_item):
    # Given a workspace limit and a user limit, both 1K
    per_user(workspace_quota="1K", disk="1K")
    # When alice writes 2000 bytes into a notebook
    body = _put(alice_api, make_item(), "a.bin", b"x" * 2000).json()
    # Then the workspace limit is named, and the user limit listed as also exceeded
    assert body["error"] == "workspace_quota_exceeded"
    assert [other["error"] for other in body["also"]] == ["user_quota_exceeded"]


def test_the_item_itself_counts_at_its_live_size_not_its_last_measurement(per_user, alice_api, make_item):
    # Given a user limit of 2K, and alice's notebook last measured at a million bytes, though empty now
    per_user(disk="2K")
    item = make_item()
    _measured(item, "alice", 1_000_000)  # stale: the workspace is empty now
    # When she writes 2048 bytes into it / Then it is admitted: the notebook counts at its live size
    assert _put(alice_api, item, "a.bin", b"x" * 2048).status_code == 200


def test_the_debtor_of_disk_is_the_owner(per_user, alice_api, make_item):
    # Given a user limit of 1K, which bob's notebook fills
    per_user(disk="1K")
    _measured(make_item(owner="bob"), "bob", 1024)
    # When alice writes 1000 bytes into her own notebook / Then it is admitted
    assert _put(alice_api, make_item(), "mine.bin", b"x" * 1000).status_code == 200
    # When she writes one byte into another notebook bob pays for
    body = _put(alice_api, make_item(owner="bob"), "bobs.bin", b"x").json()
    # Then it is refused on bob's total
    assert (body["error"], body["used"]) == ("user_quota_exceeded", 1024)


def test_shrinking_same_size_and_delete_pass_over_quota(per_user, alice_api, make_item):
    # Given alice's a.bin of 3000 bytes, written under generous limits that then drop to 1K
    per_user(workspace_quota="1G", disk="1G")
    item = make_item()
    assert _put(alice_api, item, "a.bin", b"x" * 3000).status_code == 200
    per_user(workspace_quota="1K", disk="1K")  # now far over both limits
    # When she overwrites it with as many bytes, then fewer, then deletes it / Then each passes
    assert _put(alice_api, item, "a.bin", b"y" * 3000).status_code == 200
    assert _put(alice_api, item, "a.bin", b"z" * 2000).status_code == 200
    assert alice_api.delete(item_url(item, "/files/a.bin")).status_code == 200
    # Then the file is gone
    assert not (workspace_dir(item.pk) / "a.bin").exists()


def test_a_refused_overwrite_leaves_the_old_file_intact_and_charges_nothing(per_user, alice_api, make_item):
    # Given a workspace limit of 1K, and alice's a.txt
    per_user(workspace_quota="1K", disk="1G")
    item = make_item()
    _put(alice_api, item, "a.txt", b"old content")
    # When she overwrites it with 5000 bytes / Then it is 507
    assert _put(alice_api, item, "a.txt", b"n" * 5000).status_code == 507
    # Then the old file is intact, no temp file is left and nothing is charged to the ledger
    assert (workspace_dir(item.pk) / "a.txt").read_bytes() == b"old content"
    assert [p.name for p in workspace_dir(item.pk).iterdir()] == ["a.txt"]  # no temp file left
    assert not WorkspaceDiskUsage.objects.exists()


def test_the_batch_gate_uses_the_same_limit(per_user, alice_api, make_item):
    # Given a workspace limit of 1K, filled exactly by a batch of four 256-byte files
    per_user(workspace_quota="1K")
    item = make_item()
    fits = {"operations": [{"op": "stage", "path": f"f{n}.txt", "content": "x" * 256} for n in range(4)]}
    assert alice_api.post(item_url(item, "/files:batch"), fits, format="json").status_code == 200
    # When another batch copies one of them
    one_more = {"operations": [{"op": "copy", "from": "f0.txt", "to": "g.txt"}]}
    # Then it is 507 workspace_quota_exceeded and the copy does not exist
    response = alice_api.post(item_url(item, "/files:batch"), one_more, format="json")
    assert (response.status_code, response.json()["error"]) == (507, "workspace_quota_exceeded")
    assert not (workspace_dir(item.pk) / "g.txt").exists()


def test_an_unlimited_app_disk_checks_only_the_user_total(per_user, alice_api, make_item):
    # Given an app disk limit of 0, meaning unlimited, and no user limit
    per_user(workspace_quota="0")  # disk "0" is unlimited; no per-user disk either
    # When alice writes 100000 bytes / Then it is admitted
    assert _put(alice_api, make_item(), "big.bin", b"x" * 100_000).status_code == 200


def test_an_uploaded_page_file_refused_by_quota_flashes_a_message_linking_my_resources(per_user, client, make_item):
    # Given a workspace limit of 1K, and alice's notebook
    per_user(workspace_quota="1K")
    item = make_item()
    # When she saves 5000 characters in the page's editor
    response = client.post(
        item_url(item, "/files/notes.txt"),
        {"content": "x" * 5000},
        HTTP_ACCEPT="text/html",
        HTTP_X_USER_ID="alice",
        follow=True,
    )
    # Then the page names the workspace disk limit, links to My resources, and nothing is written
    page = response.content.decode()
    assert "workspace disk limit" in page
    assert 'href="/my-resources"' in page
    assert not (workspace_dir(item.pk) / "notes.txt").exists()


# What a write costs.


def test_with_no_quota_a_write_costs_one_lookup_and_no_ledger_write(
    write_config, alice_api, make_item, django_assert_max_num_queries
):
    # Given no quota at all, and the owner's limits already read once
    write_config("")
    item = make_item()
    _put(alice_api, item, "warm.txt", b"w")  # the 5 s memo of the owner's limits is now warm
    # When alice writes a file
    with django_assert_max_num_queries(1) as captured:  # the view's item lookup, nothing else
        # Then it costs one query, the item lookup, which touches no quota table, and no ledger row is written
        assert _put(alice_api, item, "notes.txt", b"hello").status_code == 200
    assert not any("quotas_" in query["sql"] for query in captured.captured_queries)
    assert not WorkspaceDiskUsage.objects.exists()


def test_with_a_user_disk_limit_a_write_adds_one_aggregate_and_no_write(
    per_user, alice_api, make_item, django_assert_max_num_queries
):
    # Given a user disk limit, and the owner's limits already read once
    per_user(disk="1G")
    item = make_item()
    _put(alice_api, item, "warm.txt", b"w")
    # When alice writes a file
    with django_assert_max_num_queries(2) as captured:
        # Then it costs two queries, the one on the ledger a single SUM
        assert _put(alice_api, item, "notes.txt", b"hello").status_code == 200
    ledger_sql = [q["sql"] for q in captured.captured_queries if "quotas_" in q["sql"]]
    assert len(ledger_sql) == 1
    assert ledger_sql[0].startswith("SELECT SUM(")


# The sweep feeds the ledger only for owners with a disk limit.


def test_the_sweep_writes_the_ledger_only_for_owners_with_a_disk_limit(per_user, make_item):
    # Given no user disk limit except bob's override of 1K, bob's notebook of 10 bytes and one of alice's
    per_user(disk="")
    limited, free = make_item(owner="bob"), make_item()
    (workspace_dir(limited.pk) / "a.bin").write_bytes(b"x" * 10)
    services.override_set(user_id="bob", values=OverrideValues(disk=1024), actor=Actor("alice", is_staff=True))
    # When the sweep runs
    call_command("sweep")
    # Then only bob's notebook is recorded, at 10 bytes
    assert list(WorkspaceDiskUsage.objects.values_list("item_id", "owner", "bytes")) == [(str(limited.pk), "bob", 10)]
    assert not WorkspaceDiskUsage.objects.filter(item_id=str(free.pk)).exists()


def test_with_no_disk_quota_anywhere_the_sweep_writes_nothing(write_config, make_item, django_assert_max_num_queries):
    # Given no disk quota anywhere, and notebooks of alice and bob
    write_config("")
    make_item(), make_item(owner="bob")
    # When the sweep runs
    call_command("sweep")
    # Then nothing is recorded
    assert not WorkspaceDiskUsage.objects.exists()


def test_an_owner_change_to_someone_without_a_limit_drops_the_old_charge(per_user, make_item):
    # Given bob's disk limit of 1K and his notebook, charged to him by a sweep
    per_user(disk="")
    services.override_set(user_id="bob", values=OverrideValues(disk=1024), actor=Actor("alice", is_staff=True))
    item = make_item(owner="bob")
    call_command("sweep")
    assert WorkspaceDiskUsage.current.filter(owner="bob").count() == 1
    # When the notebook passes to carol, who has no disk limit, and the sweep runs again
    item.owner = "carol"
    item.save()
    call_command("sweep")
    # Then nothing is charged to bob any more
    assert not WorkspaceDiskUsage.current.filter(owner="bob").exists()


def test_the_write_check_memoises_the_item_lookup_for_five_seconds(
    per_user, make_item, clock, django_assert_num_queries
):
    # Given bob's notebook
    per_user()
    item = make_item(owner="bob")
    # When the write check looks it up ten times / Then one query answers them all
    with django_assert_num_queries(1):
        for _ in range(10):
            assert (item_facts(str(item.pk)).app_slug, item_facts(str(item.pk)).payer) == ("notebook", "bob")
    # When five seconds pass
    clock.advance(seconds=5)
    # Then the next lookup queries again
    with django_assert_num_queries(1):
        item_facts(str(item.pk))
