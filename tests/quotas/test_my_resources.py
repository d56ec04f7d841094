"""My resources: usage against limits as JSON and as a page, and closing a sandbox from there."""

from __future__ import annotations

import pytest

from quotas.models import SandboxActivity, WorkspaceDiskUsage
from tests.fixtures.items import item_url
from tests.fixtures.quotas import GIB, MIB
from workspace.sandboxes.registry import backend_named

pytestmark = pytest.mark.django_db


def _open(api, item):
    assert api.post(item_url(item, "/exec"), {"command": "true"}, format="json").status_code == 200
    return SandboxActivity.current.get(item_id=str(item.pk))


def test_the_json_shows_usage_limits_live_sandboxes_and_disk(per_user, alice_api, make_item):
    # Given alice's limits, and her notebook and investigation each running a sandbox
    per_user(count=3, cpu=4, memory="2G", disk="1G")
    notebook, investigation = make_item(title="Scratch"), make_item(app_slug="rca", title="Outage")
    _open(alice_api, notebook)
    _open(alice_api, investigation)
    # Each exec already measured its workspace; the sweep's later figure replaces it.
    WorkspaceDiskUsage.objects.filter(item_id=str(notebook.pk)).update(bytes=4096)
    # When she reads /me/resources
    body = alice_api.get("/me/resources").json()
    # Then it shows her limits, her usage, each live sandbox with its size and link, and each workspace's disk
    assert body["limits"] == {"count": 3, "cpu": 4.0, "memory": 2 * GIB, "disk": GIB}
    assert (body["sandboxes_in_use"], body["cpu_in_use"], body["memory_in_use"]) == (2, 1.0, 512 * MIB)
    assert [(row["ordinal"], row["title"], row["slug"]) for row in body["live"]] == [
        (1, "Scratch", "notebook"),
        (2, "Outage", "rca"),
    ]
    assert (body["live"][0]["item"], body["live"][0]["url"]) == (str(notebook.pk), item_url(notebook))
    assert (body["live"][0]["cores"], body["live"][0]["memory"], body["live"][0]["charges_cost"]) == (
        1.0,
        512 * MIB,
        True,
    )
    assert (body["disk_in_use"], body["disk_tracked"]) == (4096, True)
    assert [(row["title"], row["bytes"], row["url"]) for row in body["disk"]] == [
        ("Scratch", 4096, item_url(notebook)),
        ("Outage", 0, item_url(investigation, "?folder=")),
    ]


def test_the_json_is_about_the_caller_only(per_user, alice_api, bob_api, make_item):
    # Given alice's live sandbox
    per_user(count=3)
    _open(alice_api, make_item())
    # When bob reads /me/resources
    body = bob_api.get("/me/resources").json()
    # Then it is about him alone: nothing in use, nothing live
    assert (body["user_id"], body["sandboxes_in_use"], body["live"]) == ("bob", 0, [])


def test_no_limits_show_as_null_and_disk_untracked(write_config, alice_api):
    # Given no limit configured
    write_config("")
    # When alice reads /me/resources
    body = alice_api.get("/me/resources").json()
    # Then every limit is null and disk is not tracked
    assert body["limits"] == {"count": None, "cpu": None, "memory": None, "disk": None}
    assert body["disk_tracked"] is False


def test_closing_from_my_resources_truly_shuts_the_sandbox_down(per_user, alice_api, make_item):
    # Given alice may run one sandbox, and runs it
    per_user(count=1)
    item = make_item()
    row = _open(alice_api, item)
    # When she closes it from /me/resources / Then it is 204
    assert alice_api.delete(f"/me/resources/live/{item.pk}").status_code == 204
    # Then its row is closed, the backend no longer runs it, and another notebook may open one
    row.refresh_from_db()
    assert (row.is_deleted, row.close_reason) == (True, "closed")
    assert backend_named("local").probe(row.backend_sandbox_id) is False
    assert alice_api.post(item_url(make_item(), "/exec"), {"command": "true"}, format="json").status_code == 200


def test_closing_someone_elses_or_no_sandbox_is_404(per_user, alice_api, bob_api, make_item):
    # Given alice's live sandbox
    per_user()
    item = make_item()
    _open(alice_api, item)
    # When bob closes it / Then it is the usual 404, which does not say whether it exists
    response = bob_api.delete(f"/me/resources/live/{item.pk}")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "Not found."}
    # When alice closes one on a notebook that has none, or on an id that is no item / Then it is 404
    assert alice_api.delete(f"/me/resources/live/{make_item().pk}").status_code == 404
    assert alice_api.delete("/me/resources/live/nope").status_code == 404
    # Then her sandbox is still live
    assert SandboxActivity.current.filter(item_id=str(item.pk)).exists()


@pytest.mark.parametrize("item_id", ["a\x00b", "%00"])
def test_closing_a_sandbox_by_an_id_with_a_nul_is_the_usual_404_on_every_database(alice_api, item_id):
    # Given alice / When she closes a sandbox by an id no item can have (a NUL in it)
    response = alice_api.delete(f"/me/resources/live/{item_id}")
    # Then it is the usual 404, the same on SQLite and PostgreSQL
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "Not found."}


def test_the_close_button_of_a_sandbox_that_is_not_hers_says_so_on_the_page(per_user, client, alice_api, make_item):
    # Given alice's live sandbox
    per_user()
    item = make_item()
    _open(alice_api, item)
    # When bob presses a close button for it, and for an id with a NUL in it
    pages = [
        client.post(f"/my-resources/live/{item_id}/close", HTTP_X_USER_ID="bob", follow=True)
        for item_id in (item.pk, "a%00b")
    ]
    # Then each time he lands on My resources, which says so, and her sandbox is still live
    for page in pages:
        assert page.status_code == 200
        assert "That sandbox is not live any more, or it is not yours." in page.content.decode()
    assert SandboxActivity.current.filter(item_id=str(item.pk)).exists()


def test_the_payer_may_close_a_sandbox_of_an_item_someone_else_created(per_user, alice_api, bob_api, make_item):
    # Given a sandbox open on an item alice created and bob pays for
    per_user()
    item = make_item(created_by="alice", owner="bob")
    _open(alice_api, item)
    # When bob closes it from his resources / Then it is 204
    assert bob_api.delete(f"/me/resources/live/{item.pk}").status_code == 204


def test_the_page_shows_usage_links_and_close_buttons(per_user, client, alice_api, make_item):
    # Given alice's limits, and her notebook Scratch running a sandbox, with 2K measured on disk
    per_user(count=2, memory="1G", disk="1G")
    item = make_item(title="Scratch")
    _open(alice_api, item)
    WorkspaceDiskUsage.objects.filter(item_id=str(item.pk)).update(bytes=2048)
    # When her browser opens My resources
    page = client.get("/my-resources", HTTP_X_USER_ID="alice").content.decode()
    # Then it links the notebook, offers to close its sandbox and shows sizes and limits in words
    assert "My resources" in page
    assert f'href="{item_url(item)}"' in page
    assert f'data-testid="close-{item.pk}"' in page
    assert "512 MB" in page
    assert "1 GB" in page
    assert "2 KB" in page


def test_at_the_disk_total_the_page_says_why_growth_is_blocked_and_what_still_works(per_user, client, make_item):
    # Given alice whose measured workspaces hold her whole 1M disk total
    per_user(disk="1M")
    item = make_item()
    WorkspaceDiskUsage.objects.create(item_id=str(item.pk), app_slug="notebook", owner="alice", bytes=MIB)
    # When her browser opens My resources
    page = client.get("/my-resources", HTTP_X_USER_ID="alice").content.decode()
    # Then it says that her commands and uploads cannot grow anything, and that deleting still works
    assert 'data-testid="disk-full"' in page
    assert "No space left on device" in page
    assert "delete or shrink files" in page


def test_under_the_disk_total_the_page_has_no_blocked_notice(per_user, client, make_item):
    # Given alice with room left under her disk total
    per_user(disk="1G")
    WorkspaceDiskUsage.objects.create(item_id=str(make_item().pk), app_slug="notebook", owner="alice", bytes=MIB)
    # When her browser opens My resources / Then it shows no blocked-growth notice
    assert 'data-testid="disk-full"' not in client.get("/my-resources", HTTP_X_USER_ID="alice").content.decode()


def test_the_page_close_button_shuts_down_and_comes_back_with_a_message(per_user, client, alice_api, make_item):
    # Given alice's live sandbox
    per_user()
    item = make_item()
    row = _open(alice_api, item)
    # When she presses its close button on My resources
    response = client.post(f"/my-resources/live/{item.pk}/close", HTTP_X_USER_ID="alice", follow=True)
    # Then the page she lands on says it is shut down, and its row is closed
    assert "The sandbox is shut down." in response.content.decode()
    row.refresh_from_db()
    assert row.is_deleted


def test_the_page_never_deletes_files(per_user, client, alice_api, make_item):
    # Given alice's notebook holding keep.txt
    per_user(disk="1G")
    item = make_item()
    alice_api.put(item_url(item, "/files/keep.txt"), b"keep", content_type="application/octet-stream")
    # When she opens My resources and closes the notebook's sandbox there
    client.get("/my-resources", HTTP_X_USER_ID="alice")
    client.post(f"/my-resources/live/{item.pk}/close", HTTP_X_USER_ID="alice")
    # Then keep.txt is still there
    assert alice_api.get(item_url(item, "/files/keep.txt")).status_code == 200


def test_the_nav_links_my_resources(client):
    # Given bob, whose pages all share one navigation
    # When he opens My resources / Then its page links itself in the navigation
    assert 'href="/my-resources"' in client.get("/my-resources", HTTP_X_USER_ID="bob").content.decode()
