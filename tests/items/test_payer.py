"""The payer's way out (issue 30.1, spec "Area A" 5): whoever pays for an item someone else created
opens it from My resources, sees its files by name and size, deletes or shrinks them and closes
its sandbox, but neither reads nor writes its content nor works in it; staff assigning the bill
leave the payer a record on My resources."""

from __future__ import annotations

import pytest

from quotas.models import SandboxActivity
from tests.fixtures.items import exec_ok, item_url
from workspace.items.models import Item
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}
BIG = b"x" * 4096
# What the item page offers only to those who may use the item.
CREATOR_ONLY = ("terminal", "new-file", "upload", "rename-file", "chat-panel", "workflows")


@pytest.fixture
def paid_by_carol(bob_api, api_client_for) -> Item:
    """bob's notebook holding data/big.log and notes.txt, whose bill carol accepted."""
    body = bob_api.post("/a/notebook/items", {"title": "Bob's notes", "owner": "carol"}, format="json").json()
    assert api_client_for("carol").post(f"/me/resources/handovers/{body['id']}/accept").status_code == 200
    item = Item.objects.get(pk=body["id"])
    (workspace_dir(item.pk) / "data").mkdir(parents=True)
    (workspace_dir(item.pk) / "data" / "big.log").write_bytes(BIG)
    (workspace_dir(item.pk) / "notes.txt").write_text("bob's private notes")
    return item


def _truncate(client, item: Item, path: str, size: int):
    return client.post(item_url(item, "/files:truncate"), {"path": path, "size": size}, format="json")


def test_the_payer_lists_the_files_by_name_and_size(api_client_for, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When carol lists its files
    response = api_client_for("carol").get(item_url(paid_by_carol, "/files"))
    # Then she sees every file and folder with its size
    assert response.status_code == 200
    assert {(row["path"], row["size"]) for row in response.json()} >= {("data/big.log", 4096), ("notes.txt", 19)}


def test_the_payer_shrinks_a_file_without_reading_it(api_client_for, paid_by_carol):
    # Given bob's notebook that carol pays for
    carol = api_client_for("carol")
    # When she keeps the first 100 bytes of data/big.log, and tries to read notes.txt
    shrunk = _truncate(carol, paid_by_carol, "data/big.log", 100)
    read = carol.get(item_url(paid_by_carol, "/files/notes.txt"))
    # Then the file is 100 bytes long, and reading is 403 payer_only
    assert shrunk.status_code == 200
    assert shrunk.json()["path"] == "data/big.log"
    assert (workspace_dir(paid_by_carol.pk) / "data" / "big.log").read_bytes() == BIG[:100]
    assert (read.status_code, read.json()["error"]) == (403, "payer_only")


def test_the_payer_deletes_a_file(api_client_for, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When she deletes notes.txt
    response = api_client_for("carol").delete(item_url(paid_by_carol, "/files/notes.txt"))
    # Then it is gone
    assert response.status_code == 200
    assert not (workspace_dir(paid_by_carol.pk) / "notes.txt").exists()


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("put", "/files/notes.txt", b"overwritten"),
        ("post", "/files:move", {"source": "notes.txt", "target": "gone.txt"}),
        ("post", "/files:mkdir", {"path": "planted"}),
        ("post", "/exec", {"command": "rm notes.txt"}),
        ("get", "/execs", None),
    ],
    ids=["write", "rename", "mkdir", "exec", "list-commands"],
)
def test_the_payer_may_not_work_in_the_item(api_client_for, paid_by_carol, method, suffix, body):
    # Given bob's notebook that carol pays for
    carol = api_client_for("carol")
    # When she writes, renames, makes a folder, runs a command or lists its commands
    if isinstance(body, bytes):
        response = carol.put(item_url(paid_by_carol, suffix), body, content_type="application/octet-stream")
    elif body is None:
        response = getattr(carol, method)(item_url(paid_by_carol, suffix))
    else:
        response = getattr(carol, method)(item_url(paid_by_carol, suffix), body, format="json")
    # Then each is 403 payer_only and the workspace is as it was
    assert (response.status_code, response.json()["error"]) == (403, "payer_only")
    assert sorted(path.name for path in workspace_dir(paid_by_carol.pk).iterdir()) == ["data", "notes.txt"]
    assert (workspace_dir(paid_by_carol.pk) / "notes.txt").read_text() == "bob's private notes"


def test_the_payer_closes_the_items_sandbox_and_a_command_says_they_did(bob_api, api_client_for, paid_by_carol):
    # Given bob's notebook with a live sandbox that carol pays for
    exec_ok(bob_api, paid_by_carol, "true")
    # When carol closes it from the item
    response = api_client_for("carol").delete(item_url(paid_by_carol, "/sandbox"))
    # Then it is closed, and the ledger says carol closed it
    assert response.status_code == 204
    row = SandboxActivity.objects.get()
    assert (row.is_deleted, row.close_reason, row.closed_by) == (True, "closed", "carol")


@pytest.mark.parametrize("who", ["bob", "staff"])
def test_the_creator_and_staff_shrink_files_too(settings, api_client_for, paid_by_carol, who):
    # Given bob's notebook that carol pays for (dave staff)
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    client = api_client_for("bob" if who == "bob" else "dave")
    # When bob or staff empty data/big.log
    response = _truncate(client, paid_by_carol, "data/big.log", 0)
    # Then it is empty
    assert response.status_code == 200
    assert (workspace_dir(paid_by_carol.pk) / "data" / "big.log").read_bytes() == b""


def test_a_stranger_cannot_shrink_and_learns_nothing(api_client_for, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When alice, who neither made nor pays for it, tries to empty a file
    response = _truncate(api_client_for("alice"), paid_by_carol, "data/big.log", 0)
    # Then it is 404 and the file is whole
    assert response.status_code == 404
    assert (workspace_dir(paid_by_carol.pk) / "data" / "big.log").read_bytes() == BIG


@pytest.mark.parametrize(
    ("path", "size", "error"),
    [("data/big.log", 5000, "not_a_shrink"), ("data", 0, "is_directory"), ("missing.txt", 0, "file_not_found")],
)
def test_a_shrink_that_is_none_is_refused_and_changes_nothing(api_client_for, paid_by_carol, path, size, error):
    # Given bob's notebook that carol pays for
    # When she asks to "shrink" a file to more than it holds, a folder, or a file that is not there
    response = _truncate(api_client_for("carol"), paid_by_carol, path, size)
    # Then it is refused with its reason, and data/big.log is whole
    assert response.json()["error"] == error
    assert 400 <= response.status_code < 500
    assert (workspace_dir(paid_by_carol.pk) / "data" / "big.log").read_bytes() == BIG


def test_a_shrink_passes_even_over_the_disk_limit(per_user, api_client_for, paid_by_carol):
    # Given carol over her 1K per-user disk total (bob's notebook counts against it)
    per_user(disk="1K")
    # When she shrinks data/big.log
    response = _truncate(api_client_for("carol"), paid_by_carol, "data/big.log", 10)
    # Then it passes: shrinking is always allowed
    assert response.status_code == 200


def test_my_resources_links_the_payers_items_and_says_they_accepted(api_client_for, paid_by_carol):
    # Given bob's notebook whose bill carol accepted
    # When carol reads My resources
    paying = api_client_for("carol").get("/me/resources").json()["paying_for"]
    # Then it links the notebook's page and records that she accepted bob's request
    assert [(row["url"], row["named_by"], row["assigned"]) for row in paying] == [
        (item_url(paid_by_carol), "bob", False)
    ]


def test_staff_assigning_the_bill_leaves_the_payer_a_record(settings, api_client_for, client, make_item):
    # Given dave is staff, and alice's notebook
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    item = make_item(created_by="alice", title="Reports")
    # When dave names carol as its payer directly
    assert api_client_for("dave").patch(item_url(item), {"owner": "carol"}, format="json").status_code == 200
    # Then carol pays, and My resources (the API and the page) says dave assigned it without asking
    paying = api_client_for("carol").get("/me/resources").json()["paying_for"]
    assert [(row["title"], row["named_by"], row["assigned"]) for row in paying] == [("Reports", "dave", True)]
    page = client.get("/my-resources", HTTP_X_USER_ID="carol", **HTML).content.decode()
    assert "dave (staff) assigned it to you" in page
    assert f'href="{item_url(item)}"' in page


def test_handing_the_bill_back_clears_the_record(settings, api_client_for, make_item):
    # Given alice's notebook that staff assigned to carol
    settings.WORKSPACE_MOCK_STAFF = ["dave"]
    item = make_item(created_by="alice")
    api_client_for("dave").patch(item_url(item), {"owner": "carol"}, format="json")
    # When carol hands it back
    assert api_client_for("carol").post(f"/me/resources/handovers/{item.pk}/return").status_code == 200
    # Then alice pays and no record of the assignment is left
    item.refresh_from_db()
    assert (item.payer, item.owner_named_by, item.owner_assigned) == ("alice", "", False)


def test_the_creators_item_page_has_what_the_payers_lacks(client, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When bob opens its page
    page = client.get(item_url(paid_by_carol), HTTP_X_USER_ID="bob", **HTML).content.decode()
    # Then he has the terminal, the chat, workflows and the editor links (what carol's page lacks)
    for testid in CREATOR_ONLY:
        assert f'data-testid="{testid}"' in page
    assert f'href="{item_url(paid_by_carol)}/files/notes.txt"' in page
    assert 'data-testid="payer-note"' not in page


def test_the_payers_item_page_offers_only_what_the_payer_may(client, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When carol opens its page
    response = client.get(item_url(paid_by_carol), HTTP_X_USER_ID="carol", **HTML)
    page = response.content.decode()
    # Then she finds the sandbox, the files with Shrink and Delete and the way to hand the bill back,
    # and no terminal, editor links, chat, workflows or file forms
    assert response.status_code == 200
    for testid in ("payer-note", "shrink-file", "delete-file", "hand-back", "sandbox"):
        assert f'data-testid="{testid}"' in page
    for testid in CREATOR_ONLY:
        assert f'data-testid="{testid}"' not in page
    assert f'href="{item_url(paid_by_carol)}/files/notes.txt"' not in page


def test_the_payer_shrinks_and_deletes_from_the_page(client, paid_by_carol):
    # Given bob's notebook that carol pays for, opened at its data folder
    url = item_url(paid_by_carol)
    # When she shrinks data/big.log to 1K from the page, then deletes notes.txt
    shrink = client.post(
        url + "/files:truncate", {"path": "data/big.log", "size": "1K", "at": "data"}, HTTP_X_USER_ID="carol", **HTML
    )
    delete = client.post(url + "/files/notes.txt", {"action": "delete"}, HTTP_X_USER_ID="carol", **HTML)
    # Then each goes back to the folder it was made from, and the files changed
    assert shrink.status_code == 302
    assert shrink["Location"] == f"{url}?folder=data#files"
    assert delete.status_code == 302
    assert (workspace_dir(paid_by_carol.pk) / "data" / "big.log").stat().st_size == 1024
    assert not (workspace_dir(paid_by_carol.pk) / "notes.txt").exists()


def test_the_payers_refused_action_comes_back_on_their_page(client, paid_by_carol):
    # Given bob's notebook that carol pays for
    # When she asks the page to shrink a file to more than it holds
    response = client.post(
        item_url(paid_by_carol, "/files:truncate"),
        {"path": "data/big.log", "size": "1G"},
        HTTP_X_USER_ID="carol",
        **HTML,
    )
    # Then her page comes back with the refusal by the files, and the file is whole
    assert response.status_code == 400
    assert "can only be cut to fewer" in response.content.decode()
    assert (workspace_dir(paid_by_carol.pk) / "data" / "big.log").read_bytes() == BIG
