"""The item page opens one folder at a time (issue 30.7): its files and folders, folders first,
a path back up; forms sent from a folder come back to it; a refused form's page names its own
address; the disk-full message names the item and its limit."""

from __future__ import annotations

import re

import pytest

from tests.fixtures.items import item_url

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}
FILES = {"README.md": b"# hi\n", "data/raw/a.csv": b"1,2\n", "data/b.csv": b"3\n", "zeta/z.txt": b"z"}


def _listed(page: str) -> list[str]:
    return re.findall(r'data-testid="file-row" data-path="([^"]+)"', page)


def test_the_workspace_lists_its_own_files_and_folders_not_what_is_inside_them(client, make_item):
    # Given a notebook with nested folders
    item = make_item(files=FILES)
    # When alice opens it
    page = client.get(item_url(item), **HTML).content.decode()
    # Then the list shows the top folder's entries only, folders first
    assert _listed(page) == ["data", "zeta", "README.md"]


def test_a_folder_opens_with_its_entries_and_a_path_back_up(client, make_item):
    # Given a notebook with nested folders
    item = make_item(files=FILES)
    # When alice opens data/
    page = client.get(item_url(item) + "?folder=data", **HTML).content.decode()
    # Then she sees data/raw and data/b.csv, and links back to the workspace
    assert _listed(page) == ["data/raw", "data/b.csv"]
    crumbs = page[page.index('data-testid="folder-crumbs"') :].split("</nav>")[0]
    # (an empty folder keeps the item page for an app with a page of its own, investigations)
    assert f'href="{item_url(item)}?folder=#files">workspace</a>' in crumbs
    assert '<span aria-current="page" class="mono">data</span>' in crumbs
    assert 'href="?folder=data/raw#files"' in page


@pytest.mark.parametrize(("folder", "status"), [("nowhere", 404), ("README.md", 404), ("../..", 400)])
def test_a_folder_that_is_not_one_is_refused(client, make_item, folder, status):
    # Given a notebook / When a folder that does not exist, a file, or a path out is asked for
    item = make_item(files=FILES)
    response = client.get(item_url(item), {"folder": folder}, **HTML)
    # Then the site's error page says so
    assert response.status_code == status


def test_a_folder_of_many_names_lists_the_first_ones(client, make_item, monkeypatch):
    # Given a folder of 30 files and a page that lists 10
    monkeypatch.setattr("workspace.items.pages.ITEM_PAGE_FILES", 10)
    item = make_item(files={f"logs/{n:02}.log": b"x" for n in range(30)})
    # When alice opens it
    page = client.get(item_url(item) + "?folder=logs", **HTML).content.decode()
    # Then ten are listed and the page says there are more
    assert len(_listed(page)) == 10
    assert 'data-testid="files-more"' in page


def test_a_form_sent_from_a_folder_comes_back_to_it(client, make_item):
    # Given a notebook opened at data/
    item = make_item(files=FILES)
    # When alice renames data/b.csv there
    response = client.post(
        item_url(item, "/files:move"), {"source": "data/b.csv", "target": "data/c.csv", "at": "data"}, **HTML
    )
    # Then she is back in data/
    assert response.status_code == 302
    assert response["Location"] == f"{item_url(item)}?folder=data#files"


def test_a_form_sent_from_the_workspace_comes_back_at_the_files_card_which_says_what_it_did(client, make_item):
    # Given a notebook opened at its workspace
    item = make_item(files=FILES)
    # When alice makes a folder there
    response = client.post(item_url(item, "/files:mkdir"), {"path": "new", "at": ""}, **HTML)
    # Then she is back at the page's Files card, which says what was done, and the top of the page does not
    assert response["Location"] == f"{item_url(item)}#files"
    page = client.get(response["Location"], **HTML).content.decode()
    files_card = page[page.index('id="files"') :]
    assert "Created the folder new." in files_card
    assert page.count("Created the folder new.") == 1


def test_a_refused_rename_names_the_item_page_as_its_address(client, make_item):
    # Given a notebook with two files in data/
    item = make_item(files=FILES)
    # When alice renames data/b.csv onto an existing name, from data/
    response = client.post(
        item_url(item, "/files:move"), {"source": "data/b.csv", "target": "README.md", "at": "data"}, **HTML
    )
    page = response.content.decode()
    # Then the refusal comes back on the page of data/, whose own address it names for the address bar
    assert response.status_code == 409
    assert f'<link rel="canonical" href="{item_url(item)}?folder=data">' in page
    assert _listed(page) == ["data/raw", "data/b.csv"]


def test_the_disk_full_message_names_the_item_by_title_and_its_limit(client, write_config, make_item):
    # Given notebooks limited to 1K of disk, and alice's "Experiments" holding 1000 bytes
    write_config('[sandbox]\nworkspace_quota = "1K"\n')
    item = make_item(title="Experiments", files={"a.bin": b"x" * 1000})
    # When she saves a 100-byte file there
    response = client.post(item_url(item, "/files/b.txt"), {"content": "y" * 100}, **HTML)
    # Then the refusal names "Experiments" and the 1 KB limit
    page = response.content.decode()
    assert response.status_code == 507
    assert "“Experiments”" in page
    assert "1 KB" in page
