"""Renaming, new folders and deleting files: through the API and the item page's forms."""

from __future__ import annotations

import pytest

from tests.fixtures.items import item_url
from workspace.sandboxes.filestore import workspace_dir

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
    # Given alice's notebook holding a.txt and b.txt
    item = make_item()
    _put(alice_api, item, "a.txt", b"a")
    _put(alice_api, item, "b.txt", b"b")
    # When she renames a.txt to b.txt
    response = _move(alice_api, item, "a.txt", "b.txt")
    # Then it is 409 path_exists and b.txt keeps its content
    assert (response.status_code, response.json()["error"]) == (409, "path_exists")
    assert (workspace_dir(item.pk) / "b.txt").read_bytes() == b"b"


@pytest.mark.parametrize(
    ("source", "target", "status"),
    [("missing.txt", "x.txt", 404), ("a.txt", "../escape.txt", 400), ("dir", "dir/inside", 400), ("a.txt", "", 400)],
)
def test_a_bad_rename_is_refused_and_changes_nothing(alice_api, make_item, source, target, status):
    # Given alice's notebook holding a.txt and dir/f.txt
    item = make_item()
    _put(alice_api, item, "a.txt", b"a")
    _put(alice_api, item, "dir/f.txt", b"f")
    # When she renames a missing file, out of the workspace, a folder into itself, or to an empty name
    response = _move(alice_api, item, source, target)
    # Then it is refused with its status and the workspace is as it was
    assert response.status_code == status
    assert sorted(p.name for p in workspace_dir(item.pk).iterdir()) == ["a.txt", "dir"]


def test_a_folder_is_created_and_a_second_time_is_a_409(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she makes the folder data/raw, and then again
    first = alice_api.post(item_url(item, "/files:mkdir"), {"path": "data/raw"}, format="json")
    again = alice_api.post(item_url(item, "/files:mkdir"), {"path": "data/raw"}, format="json")
    # Then the first makes it with its parent, and the second is 409 path_exists
    assert first.status_code == 201
    assert (workspace_dir(item.pk) / "data" / "raw").is_dir()
    assert (again.status_code, again.json()["error"]) == (409, "path_exists")


def test_a_stranger_can_neither_rename_nor_make_folders(alice_api, bob_api, make_item):
    # Given alice's notebook holding a.txt
    item = make_item()
    _put(alice_api, item, "a.txt")
    # When bob renames the file / Then it is 404
    assert (
        bob_api.post(item_url(item, "/files:move"), {"source": "a.txt", "target": "b.txt"}, format="json").status_code
        == 404
    )
    # When he makes a folder / Then it is 404 too
    assert bob_api.post(item_url(item, "/files:mkdir"), {"path": "x"}, format="json").status_code == 404
    # Then a.txt is still there
    assert (workspace_dir(item.pk) / "a.txt").exists()


def test_the_item_page_deletes_renames_and_makes_folders(client, alice_api, make_item):
    # Given alice's old.txt, and the item page's forms a browser posts
    item = make_item()
    _put(alice_api, item, "old.txt", b"o")
    headers = {"HTTP_X_USER_ID": "alice", "HTTP_ACCEPT": "text/html"}
    # When she renames it to new.txt, makes a folder and deletes new.txt with those forms
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
