"""Renaming, new folders and deleting files: through the API and the item page's forms."""

from __future__ import annotations

import pytest

from tests.fixtures.items import item_url
from workspace.items.filestore import workspace_dir

pytestmark = pytest.mark.django_db


def _move(api, item, source, target):
    return api.post(item_url(item, "/files:move"), {"source": source, "target": target}, format="json")


def _put(api, item, path, data=b"x"):
    return api.put(item_url(item, f"/files/{path}"), data, content_type="application/octet-stream")


def test_a_file_is_renamed_into_a_new_folder(alice_api, make_item):
    # Given a file
    item = make_item()
    _put(alice_api, item, "draft.txt", b"hello")
    # When it is moved to a path in a folder that does not exist yet
    response = alice_api.post(
        item_url(item, "/files:move"), {"source": "draft.txt", "target": "docs/final.txt"}, format="json"
    )
    # Then it is there, unchanged, and gone from its old name
    assert response.status_code == 200
    assert response.json() == {"path": "docs/final.txt", "old_size": 5, "new_size": 5}
    assert (workspace_dir(item.pk) / "docs" / "final.txt").read_bytes() == b"hello"
    assert not (workspace_dir(item.pk) / "draft.txt").exists()


def test_a_rename_never_overwrites(alice_api, make_item):
    item = make_item()
    _put(alice_api, item, "a.txt", b"a")
    _put(alice_api, item, "b.txt", b"b")
    response = _move(alice_api, item, "a.txt", "b.txt")
    assert (response.status_code, response.json()["error"]) == (409, "path_exists")
    assert (workspace_dir(item.pk) / "b.txt").read_bytes() == b"b"


@pytest.mark.parametrize(
    ("source", "target", "status"),
    [("missing.txt", "x.txt", 404), ("a.txt", "../escape.txt", 400), ("dir", "dir/inside", 400), ("a.txt", "", 400)],
)
def test_a_bad_rename_is_refused_and_changes_nothing(alice_api, make_item, source, target, status):
    item = make_item()
    _put(alice_api, item, "a.txt", b"a")
    _put(alice_api, item, "dir/f.txt", b"f")
    response = _move(alice_api, item, source, target)
    assert response.status_code == status
    assert sorted(p.name for p in workspace_dir(item.pk).iterdir()) == ["a.txt", "dir"]


def test_a_folder_is_created_and_a_second_time_is_a_409(alice_api, make_item):
    item = make_item()
    first = alice_api.post(item_url(item, "/files:mkdir"), {"path": "data/raw"}, format="json")
    again = alice_api.post(item_url(item, "/files:mkdir"), {"path": "data/raw"}, format="json")
    assert first.status_code == 201
    assert (workspace_dir(item.pk) / "data" / "raw").is_dir()
    assert (again.status_code, again.json()["error"]) == (409, "path_exists")


def test_a_stranger_can_neither_rename_nor_make_folders(alice_api, bob_api, make_item):
    item = make_item()
    _put(alice_api, item, "a.txt")
    assert (
        bob_api.post(item_url(item, "/files:move"), {"source": "a.txt", "target": "b.txt"}, format="json").status_code
        == 404
    )
    assert bob_api.post(item_url(item, "/files:mkdir"), {"path": "x"}, format="json").status_code == 404
    assert (workspace_dir(item.pk) / "a.txt").exists()


def test_the_item_page_deletes_renames_and_makes_folders(client, alice_api, make_item):
    # Given a file, through the browser forms of the item page
    item = make_item()
    _put(alice_api, item, "old.txt", b"o")
    headers = {"HTTP_X_USER_ID": "alice", "HTTP_ACCEPT": "text/html"}
    client.post(item_url(item, "/files:move"), {"source": "old.txt", "target": "new.txt"}, **headers)
    client.post(item_url(item, "/files:mkdir"), {"path": "folder"}, **headers)
    client.post(item_url(item, "/files/new.txt"), {"action": "delete"}, **headers)
    # Then the workspace holds just the new folder
    assert [p.name for p in workspace_dir(item.pk).iterdir()] == ["folder"]


def test_a_refused_save_keeps_the_text_and_names_the_limit(write_config, client, make_item):
    # Given a workspace of 1K
    write_config('[sandbox]\nworkspace_quota = "1K"\n')
    item = make_item()
    typed = "x" * 2048
    # When a person saves 2K of text in the editor
    response = client.post(
        item_url(item, "/files/notes.txt"), {"content": typed}, HTTP_X_USER_ID="alice", HTTP_ACCEPT="text/html"
    )
    page = response.content.decode()
    # Then the editor comes back with the text, the limit named and a way to free room
    assert response.status_code == 507
    assert typed in page
    assert "workspace disk limit" in page
    assert "Free capacity on My resources" in page
    assert not (workspace_dir(item.pk) / "notes.txt").exists()
