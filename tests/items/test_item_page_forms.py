"""The item page's file forms (rename, new folder, delete, upload, open) and the editor: a refusal
comes back on the page with its status, next to the form, every binding limit named and what was
typed still in the form; the disk rules are the file services' (shrinking and deleting always pass)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.fixtures.items import item_url
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html", "HTTP_X_USER_ID": "alice"}
STRANGER = {"HTTP_ACCEPT": "text/html", "HTTP_X_USER_ID": "bob"}


def _files(item) -> list[str]:
    return sorted(path.relative_to(workspace_dir(item.pk)).as_posix() for path in workspace_dir(item.pk).rglob("*"))


def test_a_rename_onto_an_existing_name_comes_back_with_the_typed_name(client, make_item):
    # Given alice's draft.txt and final.txt
    item = make_item()
    (workspace_dir(item.pk) / "draft.txt").write_text("draft")
    (workspace_dir(item.pk) / "final.txt").write_text("final")
    # When she renames draft.txt to final.txt from the page
    response = client.post(item_url(item, "/files:move"), {"source": "draft.txt", "target": "final.txt"}, **HTML)
    page = response.content.decode()
    # Then the item page answers 409, says the name is taken, and the rename box is open with what she typed
    assert response.status_code == 409
    assert "already exists" in page
    assert '<details class="ws-rename" open>' in page
    assert 'value="final.txt"' in page
    assert (workspace_dir(item.pk) / "draft.txt").read_text() == "draft"


@pytest.mark.parametrize(
    ("method", "suffix", "form", "status", "says", "typed"),
    [
        ("post", "/files:mkdir", {"path": "../outside"}, 400, "climbs out of the workspace", ["../outside"]),
        ("post", "/upload", {"folder": "incoming"}, 400, "Choose a file to upload.", ["incoming"]),
        ("get", "", {"open": "../escape.txt"}, 400, "climbs out of the workspace", ["../escape.txt"]),
        ("get", "/files/data", {}, 400, "is a folder, not a file", ["data"]),
        (
            "post",
            "",
            {"title": "Renamed", "owner": "nobody-here"},
            400,
            "is not in the user directory",
            ["Renamed", "nobody-here"],
        ),
    ],
    ids=["new folder", "upload without a file", "text file out of the workspace", "a folder as a text file", "details"],
)
def test_a_refused_form_comes_back_on_the_item_page_with_what_was_typed(
    client, make_item, method, suffix, form, status, says, typed
):
    # Given alice's notebook "Scratch" holding the folder data
    item = make_item()
    (workspace_dir(item.pk) / "data").mkdir()
    # When her browser sends one of the item page's forms with something the services refuse
    response = getattr(client, method)(item_url(item, suffix), form, **HTML)
    page = response.content.decode()
    # Then the item page answers with the refusal's status and message, the form holds what she typed,
    # and nothing changed
    assert response.status_code == status
    assert says in page
    assert all(f'value="{value}"' in page for value in typed)
    assert _files(item) == ["data"]
    item.refresh_from_db()
    assert item.title == "Scratch"


def test_deleting_a_folder_that_holds_files_is_refused_and_keeps_them(client, make_item):
    # Given alice's folder data holding one file
    item = make_item()
    (workspace_dir(item.pk) / "data").mkdir()
    (workspace_dir(item.pk) / "data" / "a.csv").write_text("1,2")
    # When she deletes the folder from the page
    response = client.post(item_url(item, "/files/data"), {"action": "delete"}, **HTML)
    # Then the page answers 409 saying it is not empty, and the file is still there
    assert response.status_code == 409
    assert "is not empty" in response.content.decode()
    assert _files(item) == ["data", "data/a.csv"]


def test_the_text_file_form_opens_the_editor_of_the_path_typed(client, make_item):
    # Given alice's notebook
    item = make_item()
    # When she asks for the text file "notes/./to do.md"
    response = client.get(item_url(item), {"open": "notes/./to do.md"}, **HTML)
    # Then she is sent to the editor of notes/to do.md
    assert response.status_code == 302
    assert response.url == item_url(item, "/files/notes/to%20do.md")


def test_a_stranger_asking_for_a_text_file_gets_404(client, make_item):
    # Given alice's notebook
    item = make_item()
    # When bob asks its page for a text file / Then it is 404
    assert client.get(item_url(item), {"open": "notes.md"}, **STRANGER).status_code == 404


def test_a_refused_save_names_every_limit_that_bound(write_config, client, make_item):
    # Given workspaces of 1K and alice held to 1K of disk across her items
    write_config('[sandbox]\nworkspace_quota = "1K"\n[resources.per_user]\ndisk = "1K"\n')
    item = make_item()
    typed = "y" * 2048
    # When she saves 2K of text in the editor
    response = client.post(item_url(item, "/files/notes.txt"), {"content": typed}, **HTML)
    page = response.content.decode()
    # Then the editor answers 507 with her text, the workspace limit first and her own disk limit also
    assert response.status_code == 507
    assert typed in page
    assert "workspace disk limit" in page
    assert "alice&#x27;s per-user disk limit" in page
    assert "Free capacity on My resources" in page
    assert not (workspace_dir(item.pk) / "notes.txt").exists()


def test_a_refused_upload_names_every_limit_that_bound(write_config, client, make_item):
    # Given workspaces of 1K and alice held to 1K of disk across her items
    write_config('[sandbox]\nworkspace_quota = "1K"\n[resources.per_user]\ndisk = "1K"\n')
    item = make_item()
    # When she uploads 2K from the page
    upload = SimpleUploadedFile("big.bin", b"z" * 2048)
    response = client.post(item_url(item, "/upload"), {"file": upload}, **HTML)
    page = response.content.decode()
    # Then the item page answers 507 naming both limits and linking to My resources, and nothing is stored
    assert response.status_code == 507
    assert "workspace disk limit" in page
    assert "alice&#x27;s per-user disk limit" in page
    assert "Free capacity on My resources" in page
    assert _files(item) == []


@pytest.mark.parametrize(
    ("form", "left"),
    [({"content": "kept the end"}, {"log.txt": "kept the end"}), ({"action": "delete"}, {})],
    ids=["shrink in the editor", "delete from the list"],
)
def test_a_workspace_over_its_limit_can_still_shrink_and_delete_from_the_page(
    write_config, client, make_item, form, left
):
    # Given a notebook holding 2K in a deployment whose workspaces now hold 1K
    write_config('[sandbox]\nworkspace_quota = "1K"\n')
    item = make_item()
    (workspace_dir(item.pk) / "log.txt").write_text("l" * 2048)
    # When alice shrinks or deletes log.txt from the page
    response = client.post(item_url(item, "/files/log.txt"), form, **HTML)
    # Then the page takes it
    assert response.status_code == 302
    assert {path: (workspace_dir(item.pk) / path).read_text() for path in _files(item)} == left


@pytest.mark.parametrize(
    ("suffix", "form"),
    [
        ("/files:move", {"source": "a.txt", "target": "b.txt"}),
        ("/files:mkdir", {"path": "planted"}),
        ("/files/a.txt", {"action": "delete"}),
        ("/files/a.txt", {"content": "planted"}),
        ("/upload", {"file": "planted"}),
    ],
)
def test_a_stranger_posting_an_item_page_form_gets_404_and_changes_nothing(client, make_item, suffix, form):
    # Given alice's notebook holding a.txt
    item = make_item()
    (workspace_dir(item.pk) / "a.txt").write_text("alice's")
    if form.get("file"):
        form = {"file": SimpleUploadedFile("planted.txt", b"planted")}
    # When bob posts one of its page's forms
    response = client.post(item_url(item, suffix), form, **STRANGER)
    # Then it is 404 and the workspace is as it was
    assert response.status_code == 404
    assert _files(item) == ["a.txt"]
    assert (workspace_dir(item.pk) / "a.txt").read_text() == "alice's"


def test_the_item_page_costs_a_few_queries_however_many_files(client, make_item, django_assert_max_num_queries):
    # Given alice's notebook holding forty files
    item = make_item()
    for n in range(40):
        (workspace_dir(item.pk) / f"file-{n}.txt").write_text(str(n))
    # When her browser opens the item page
    with django_assert_max_num_queries(8):
        page = client.get(item_url(item), **HTML).content.decode()
    # Then it lists them all
    assert page.count('data-testid="file-row"') == 40
