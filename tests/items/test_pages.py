"""Pages share the API's paths: the apps, an app's items, an item with files, terminal and sandbox."""

from __future__ import annotations

import pytest

from tests.fixtures.items import item_url
from workspace.items import pages
from workspace.items.models import Item
from workspace.sandboxes.filestore import workspace_dir

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html", "HTTP_X_USER_ID": "alice"}


def test_the_apps_page_lists_the_configured_apps(client):
    # Given the shipped apps
    # When alice's browser opens /a
    page = client.get("/a", **HTML).content.decode()
    # Then the page lists the notebook and investigations apps
    assert "Notebook" in page
    assert "Investigations" in page


def test_the_items_page_creates_an_item_and_redirects_to_it(client):
    # Given alice's browser on the items page
    # When she submits the create form
    response = client.post("/a/notebook/items", {"title": "From a form"}, **HTML)
    # Then she is sent to the new item, which she created
    item = Item.objects.get()
    assert response.status_code == 302
    assert response.url == item_url(item)
    assert item.created_by == "alice"


def test_the_items_page_lists_my_items_in_few_queries(client, make_item, django_assert_max_num_queries):
    # Given twenty notebooks of alice's
    for n in range(20):
        make_item(title=f"item {n}")
    # When her browser opens the items page
    with django_assert_max_num_queries(4):
        page = client.get("/a/notebook/items", **HTML).content.decode()
    # Then it lists them, the newest included, in a few queries
    assert "item 19" in page


def test_the_items_list_and_the_item_page_name_who_pays_for_each_item(client, make_item):
    # Given alice's notebook that carol pays for, and one alice pays for herself
    paid_by_carol = make_item(title="Carol pays", owner="carol")
    make_item(title="Alice pays")

    # When alice's browser opens the items page and the first item's page
    listing = client.get("/a/notebook/items", **HTML).content.decode()
    page = client.get(item_url(paid_by_carol), **HTML).content.decode()

    # Then the Owner column names each payer, and the item page names its owner
    assert '<td data-label="Owner">carol</td>' in listing
    assert '<td data-label="Owner">alice</td>' in listing
    assert "owner carol" in page


def test_the_item_page_shows_files_terminal_and_sandbox(client, make_item):
    # Given alice's notebook holding notes.txt, with no sandbox open
    item = make_item(title="Mine")
    (workspace_dir(item.pk) / "notes.txt").write_text("hello")
    # When her browser opens its page
    page = client.get(item_url(item), **HTML).content.decode()
    # Then it shows the file, the terminal form and that no sandbox is open
    assert "notes.txt" in page
    assert 'data-testid="exec-form"' in page
    assert 'data-testid="no-sandbox"' in page


@pytest.mark.parametrize(("held", "more"), [(5, True), (3, False)], ids=["more-than-listed", "as-many-as-listed"])
def test_an_item_page_lists_its_first_files_and_says_when_there_are_more(
    client, make_item, monkeypatch, held: int, more: bool
):
    # Found attacking the item page: it rendered up to 5,000 file rows, each with its rename and
    # delete forms (65,000 files made by sandbox code: a 9 MB page in 1.3 s, fetched again after
    # every terminal command).
    # Given an item page that lists three files, and alice's notebook holding `held`
    monkeypatch.setattr(pages, "ITEM_PAGE_FILES", 3)
    item = make_item(files={f"file{n}.txt": b"x" for n in range(held)})

    # When her browser opens its page
    page = client.get(item_url(item), **HTML).content.decode()

    # Then it lists three of them, and says the list stops there only when more are held
    assert page.count('data-testid="file-row"') == 3
    assert ('data-testid="files-more"' in page) is more


def test_someone_elses_item_page_is_404(client, make_item):
    # Given bob's notebook
    item = make_item(created_by="bob")
    # When alice's browser opens its page / Then it is 404
    assert client.get(item_url(item), **HTML).status_code == 404


def test_editing_a_text_file_on_its_page_saves_it(client, make_item):
    # Given alice's notebook
    item = make_item()
    # When she saves a text file in a new folder from its edit page, with a CRLF line ending
    response = client.post(item_url(item, "/files/notes/todo.md"), {"content": "- write tests\r\n"}, **HTML)
    # Then she is sent back, the file is stored with a plain newline, and its page shows the text
    assert response.status_code == 302
    assert (workspace_dir(item.pk) / "notes/todo.md").read_text() == "- write tests\n"
    assert "- write tests" in client.get(item_url(item, "/files/notes/todo.md"), **HTML).content.decode()


def test_uploading_a_file_from_the_page_stores_it_byte_for_byte(client, make_item):
    from django.core.files.uploadedfile import SimpleUploadedFile

    # Given alice's notebook and a file of every byte value
    item = make_item()
    upload = SimpleUploadedFile("data.bin", bytes(range(256)))
    # When she uploads it from the page into the folder in
    client.post(item_url(item, "/upload"), {"file": upload, "folder": "in"}, **HTML)
    # Then it is stored byte for byte
    assert (workspace_dir(item.pk) / "in/data.bin").read_bytes() == bytes(range(256))


def test_a_bad_path_on_a_page_comes_back_as_a_message(client, make_item):
    # Given alice's notebook
    item = make_item()
    # When she saves a file at a path that climbs out of the workspace, from the page
    response = client.post(item_url(item, "/files/a/../../x"), {"content": "x"}, follow=True, **HTML)
    # Then the page she lands on says the path climbs out
    assert "climbs out" in response.content.decode()


def test_the_close_button_shuts_the_sandbox_down(client, alice_api, make_item):
    # Given alice's notebook whose sandbox a command opened, so its page shows a close button
    item = make_item()
    alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")
    assert 'data-testid="close-sandbox"' in client.get(item_url(item), **HTML).content.decode()
    # When she presses it
    client.post(item_url(item, "/sandbox"), **HTML)
    # Then the page shows no sandbox
    assert 'data-testid="no-sandbox"' in client.get(item_url(item), **HTML).content.decode()


@pytest.mark.parametrize(("payer", "frees"), [("", "of your limits"), ("bob", "of bob’s limits")])
def test_the_close_button_says_whose_limits_closing_frees(client, alice_api, make_item, payer, frees):
    # Given alice's notebook with a live sandbox, paid for by herself or by bob
    item = make_item(owner=payer)
    alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json")

    # When she opens its page
    page = client.get(item_url(item), **HTML).content.decode()

    # Then the close button says whose limits the sandbox counts against
    assert f"frees its share {frees}." in page


def test_demo_loader_is_idempotent(db):
    from workspace.items import demo

    # Given the demo data, which says a line for each item it creates
    lines: list[str] = []
    # When it is loaded twice
    demo.load(say=lines.append)
    demo.load(say=lines.append)
    # Then alice has its two notebooks once, and the second load said nothing
    assert Item.objects.filter(created_by="alice", app_slug="notebook").count() == 2
    assert len(lines) == 2


@pytest.mark.parametrize("data", [b"x" * (pages.EDITABLE_BYTES + 1), b"\xff\xfe binary"], ids=["too-long", "not-utf8"])
def test_a_file_the_editor_cannot_hold_opens_without_the_editor(client, make_item, data: bytes):
    # Given a file longer than the editor takes, or not UTF-8
    item = make_item(files={"data.txt": data})
    # When alice opens it on its page
    response = client.get(item_url(item, "/files/data.txt"), **HTML)
    # Then the page answers without the edit form
    assert response.status_code == 200
    assert 'data-testid="edit-file"' not in response.content.decode()
