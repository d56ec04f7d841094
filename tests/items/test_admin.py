"""Items in admin: edits and deletes go through the item services, so admin keeps the API's rules."""

from __future__ import annotations

import pytest
from django.urls import reverse

from collab.errors import Unavailable
from quotas import ledger
from quotas.models import SandboxActivity, WorkspaceDiskUsage
from tests.fixtures.items import item_url
from workspace.items import lifecycle
from workspace.items.models import HandoverEvent, Item
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db


def _change(client, item: Item, **fields: str):
    return client.post(reverse("admin:items_item_change", args=[item.pk]), fields)


def test_staff_rename_an_item_and_bill_bob_directly_in_admin(admin_client_logged_in, make_item):
    # Given alice's item
    item = make_item(title="Scratch")

    # When staff change its title and owner in admin
    response = _change(admin_client_logged_in, item, title="Renamed", owner="bob")

    # Then both change, bob pays at once (staff assign directly) and the change is stamped
    assert response.status_code == 302
    item.refresh_from_db()
    assert (item.title, item.owner, item.pending_owner, item.updated_by) == ("Renamed", "bob", "", "root")


def test_a_title_past_200_characters_is_refused_in_admin_and_nothing_changes(admin_client_logged_in, make_item):
    # Given alice's item
    item = make_item(title="Scratch")

    # When staff try a 201-character title
    response = _change(admin_client_logged_in, item, title="x" * 201, owner="alice")

    # Then the form shows the error and the item keeps its title
    assert response.status_code == 200
    assert b"errornote" in response.content
    item.refresh_from_db()
    assert item.title == "Scratch"


def test_an_owner_not_in_the_directory_is_refused_in_admin(admin_client_logged_in, make_item):
    # Given alice's item
    item = make_item()

    # When staff name an unknown owner
    response = _change(admin_client_logged_in, item, title="Scratch", owner="mallory")

    # Then the form says so and alice still pays
    assert response.status_code == 200
    assert b"is not in the user directory" in response.content
    item.refresh_from_db()
    assert item.owner == "alice"


def test_admin_cannot_add_an_item_without_its_app(admin_client_logged_in):
    # Given staff in admin
    # When staff open the add form
    response = admin_client_logged_in.get(reverse("admin:items_item_add"))

    # Then it is refused: items are made in their app, with their workspace
    assert response.status_code == 403


def test_deleting_an_item_in_admin_closes_its_sandbox_and_removes_its_workspace(
    admin_client_logged_in, alice_api, make_item, django_capture_on_commit_callbacks
):
    # Given an item with a file, a live sandbox and a measured disk row
    item = make_item()
    written = alice_api.put(item_url(item, "/files/notes.txt"), b"hello", content_type="application/octet-stream")
    assert written.status_code == 200
    assert alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json").status_code == 200
    WorkspaceDiskUsage.objects.create(item_id=str(item.pk), app_slug="notebook", owner="alice", bytes=5)

    # When staff delete it in admin
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_logged_in.post(reverse("admin:items_item_delete", args=[item.pk]), {"post": "yes"})

    # Then the sandbox is closed, the row, workspace and disk charge are gone
    assert response.status_code == 302
    assert not Item.objects.filter(pk=item.pk).exists()
    assert ledger.live_row_of_item(item.pk) is None
    assert not SandboxActivity.current.filter(item_id=str(item.pk), closed_at__isnull=True).exists()
    assert not workspace_dir(item.pk).exists()
    assert ledger.disk_usage_of_item(item.pk) is None


def test_the_admin_delete_action_deletes_every_chosen_item_through_the_service(
    admin_client_logged_in, make_item, django_capture_on_commit_callbacks
):
    # Given two items
    items = [make_item(title="One"), make_item(title="Two")]

    # When staff delete both with the list's action
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client_logged_in.post(
            reverse("admin:items_item_changelist"),
            {"action": "delete_selected", "_selected_action": [item.pk for item in items], "post": "yes"},
        )

    # Then both rows and both workspaces are gone
    assert response.status_code == 302
    assert not Item.objects.filter(pk__in=[item.pk for item in items]).exists()
    assert not any(workspace_dir(item.pk).exists() for item in items)


def test_a_sandbox_the_backend_cannot_close_refuses_the_delete_and_keeps_the_item(
    admin_client_logged_in, make_item, monkeypatch
):
    # Given an item whose sandbox the backend cannot confirm closed
    item = make_item()

    def unreachable(*, item: Item) -> int:
        raise Unavailable(error="sandbox_host_unavailable", detail="The sandbox host did not answer.")

    monkeypatch.setattr(lifecycle, "sandbox_close", unreachable)

    # When staff delete it in admin
    response = admin_client_logged_in.post(
        reverse("admin:items_item_delete", args=[item.pk]), {"post": "yes"}, follow=True
    )

    # Then the page says why and the item and its workspace stay
    assert b"The sandbox host did not answer." in response.content
    assert Item.objects.filter(pk=item.pk).exists()
    assert workspace_dir(item.pk).exists()


def test_staff_assigning_a_payer_in_admin_leaves_the_payer_a_record(admin_client_logged_in, make_item):
    # Given alice's item
    item = make_item(created_by="alice")
    # When staff name carol as its payer in admin
    response = _change(admin_client_logged_in, item, title=item.title, owner="carol")
    # Then carol pays, and the item records that staff assigned it without asking her
    assert response.status_code == 302
    item.refresh_from_db()
    assert (item.payer, item.owner_named_by, item.owner_assigned) == ("carol", "root", True)


def test_staff_read_what_became_of_each_handover_in_admin_and_cannot_edit_it(
    admin_client_logged_in, make_item, django_assert_max_num_queries
):
    # Given bob's item that carol accepted to pay for, and one carol declined
    for title, outcome in (("Shared", HandoverEvent.Outcome.ACCEPTED), ("Other", HandoverEvent.Outcome.DECLINED)):
        item = make_item(created_by="bob", title=title)
        HandoverEvent.objects.create(item=item, outcome=outcome, by="carol", told="bob")
    # When staff open the list
    with django_assert_max_num_queries(12):
        page = admin_client_logged_in.get(reverse("admin:items_handoverevent_changelist")).content.decode()
    # Then both show with who answered and who was told, with no way to add one
    assert all(shown in page for shown in ("Shared", "Other", "declined"))
    assert admin_client_logged_in.get(reverse("admin:items_handoverevent_add")).status_code == 403
