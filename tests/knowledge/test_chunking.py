"""Passages that read well: a heading starts a chunk and stays its title, list items and code stay
whole, PDF pages keep their number; titles are searched and shown; citation counts work as before."""

from __future__ import annotations

import re

import pytest

from knowledge.answers import retrieve_passages
from knowledge.chunking import chunk_blocks
from knowledge.formats import ExtractionError, Kind, extract_blocks, markdown_blocks, text_blocks
from knowledge.models import Chunk
from tests.knowledge.pdf import pdf_with_pages, pdf_with_sized_lines

pytestmark = pytest.mark.django_db

BACKUPS = (
    "# Backup policy\n\n"
    "## Schedule\n\nBackups run every night at 02:00 and are kept for one year.\n\n"
    "## Restores\n\nRestores are tested monthly by the on-call engineer.\n"
)
ITEM = "Check that the restored database answers queries and that its row counts match the source. "


def _chunks(alice_api, document_id: str) -> list[dict]:
    return alice_api.get(f"/kb/documents/{document_id}/chunks").json()


def test_a_markdown_heading_starts_a_passage_and_is_its_title_not_its_text(make_collection, upload, alice_api):
    # Given Markdown with a title heading and two sections
    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "backups.md", BACKUPS, content_type="text/markdown").json()["id"]

    # Then each section is a chunk titled with its headings, and no heading runs into a sentence
    assert [(chunk["title"], chunk["text"]) for chunk in _chunks(alice_api, document_id)] == [
        ("Backup policy › Schedule", "Backups run every night at 02:00 and are kept for one year."),
        ("Backup policy › Restores", "Restores are tested monthly by the on-call engineer."),
    ]


def test_a_list_item_is_never_cut_between_chunks():
    # Given a list of six items of about 200 characters each: three chunks' worth
    items = [f"{ITEM * 2}Step {n}." for n in range(6)]
    markdown = "# Restore drill\n\n" + "".join(f"- {item}\n" for item in items)

    # When it is chunked
    chunks = chunk_blocks(markdown_blocks(markdown), max_chunks=100)

    # Then there are several chunks, each item is whole in exactly one of them, one line per item
    assert len(chunks) > 1
    for item in items:
        assert sum(f"- {item}" in chunk.text.split("\n") for chunk in chunks) == 1
    assert all(chunk.title == "Restore drill" and len(chunk.text) <= 700 for chunk in chunks)


def test_nested_list_items_stay_with_their_parent_item():
    # Given an ordered list whose second item has two sub-items
    markdown = "1. Pick a snapshot\n2. Restore it\n   - check row counts\n   - start the app\n3. Write down the time\n"

    # When it is chunked
    [chunk] = chunk_blocks(markdown_blocks(markdown), max_chunks=100)

    # Then the sub-items sit indented under their item, numbered as written
    assert chunk.text == (
        "1. Pick a snapshot\n2. Restore it\n  - check row counts\n  - start the app\n3. Write down the time"
    )


def test_a_code_block_keeps_its_lines_and_stays_whole():
    # Given a paragraph of 650 characters, then a code block of four indented lines
    code = "def restore(name):\n    dump = latest(name)\n    load(dump)\n    return dump"
    markdown = f"# Restore script\n\n{'Read this first. ' * 38}\n\n```python\n{code}\n```\n"

    # When it is chunked
    chunks = chunk_blocks(markdown_blocks(markdown), max_chunks=100)

    # Then the code is one chunk of its own, line for line with its indentation, rather than split across two
    assert [chunk.text for chunk in chunks if "def restore" in chunk.text] == [code]


def test_a_paragraph_longer_than_a_chunk_is_cut_at_sentence_ends():
    # Given one paragraph of 40 sentences (about 1,300 characters)
    paragraph = " ".join(f"Sentence {n} ends here." for n in range(40))

    # When it is chunked
    chunks = chunk_blocks(text_blocks(paragraph), max_chunks=100)

    # Then it spans chunks of at most 700 characters that each end a sentence, and nothing is lost
    assert len(chunks) == 2
    assert all(len(chunk.text) <= 700 and chunk.text.endswith("ends here.") for chunk in chunks)
    assert " ".join(chunk.text for chunk in chunks) == paragraph


def test_in_plain_text_a_short_line_before_a_paragraph_is_a_heading():
    # Given plain text: a title line, a section line, a paragraph, then a second section line and paragraph
    text = "Backup policy\n\nSchedule\n\nBackups run nightly.\nThey are kept for a year.\n\nRestores\n\nTested monthly."

    # When it is chunked
    chunks = chunk_blocks(text_blocks(text), max_chunks=100)

    # Then headings title their paragraphs (a section after text replaces the last), and the wrapped lines are one
    assert [(chunk.title, chunk.text) for chunk in chunks] == [
        ("Backup policy › Schedule", "Backups run nightly. They are kept for a year."),
        ("Backup policy › Restores", "Tested monthly."),
    ]


def test_in_plain_text_bullets_are_items_and_indented_paragraphs_are_code():
    # Given plain text with a lead-in, two bullets (the second wrapped, its second line not indented), and an
    # indented command
    text = "Before a restore:\n- stop the app\n- take a snapshot of the\ncurrent volume\n\n    pg_restore -d app x.dump"

    # When it is read
    blocks = text_blocks(text)

    # Then the lead-in is prose, each bullet an item with its wrapped line, and the command code
    assert [(block.kind, block.text) for block in blocks] == [
        (Kind.PARAGRAPH, "Before a restore:"),
        (Kind.ITEM, "- stop the app"),
        (Kind.ITEM, "- take a snapshot of the current volume"),
        (Kind.CODE, "pg_restore -d app x.dump"),
    ]


def test_pdf_pages_keep_their_number_and_no_chunk_spans_two_pages(make_collection, upload, alice_api):
    # Given a PDF of two short pages
    data = pdf_with_pages([["Backups are kept for one year."], ["Restores are tested monthly."]])

    # When alice uploads it and it is ingested
    document_id = upload(make_collection().id, "policy.pdf", data, content_type="application/pdf").json()["id"]

    # Then each page is its own chunk, numbered
    assert [(chunk["page"], chunk["text"]) for chunk in _chunks(alice_api, document_id)] == [
        (1, "Backups are kept for one year."),
        (2, "Restores are tested monthly."),
    ]


def test_text_and_markdown_chunks_have_no_page(make_collection, upload, alice_api):
    # Given a Markdown document, ingested
    document_id = upload(make_collection().id, "backups.md", BACKUPS, content_type="text/markdown").json()["id"]

    # When alice lists its chunks / Then none has a page
    assert {chunk["page"] for chunk in _chunks(alice_api, document_id)} == {None}


def test_a_markdown_document_of_headings_only_is_refused_as_empty():
    # Given Markdown with headings and no text under them
    # When it is read / Then it is refused as holding no readable text
    with pytest.raises(ExtractionError, match="no readable text"):
        extract_blocks(b"# One\n\n## Two\n", "markdown", max_chars=1000)


def test_a_question_that_names_only_a_chunk_title_finds_it(make_collection, upload):
    # Given the backup policy ingested: "Restores" is the title of its second chunk
    collection = make_collection()
    upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown")

    # When someone asks with a word only a title holds
    passages = retrieve_passages(question="policy", collection_ids=[collection.id])

    # Then both sections are found (both sit under "Backup policy"), each titled
    assert sorted(passage.title for passage in passages) == ["Backup policy › Restores", "Backup policy › Schedule"]


def test_adjacent_chunks_of_two_sections_are_two_passages(make_collection, upload):
    # Given the backup policy, whose two sections are adjacent chunks
    collection = make_collection()
    upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown")

    # When a question matches both
    passages = retrieve_passages(question="backup policy", collection_ids=[collection.id])

    # Then they are not merged into one passage: each keeps its own title and chunk
    assert len(passages) == 2
    assert all(len(passage.chunk_ids) == 1 for passage in passages)


def test_an_answer_from_titled_chunks_counts_each_marker_and_chunk_once(
    make_collection, upload, make_chat, ask, alice_api
):
    # Given a chat over the backup policy
    collection = make_collection()
    document_id = upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown").json()["id"]
    chat = make_chat(collection)

    # When alice asks a question both sections answer
    answer = ask(chat.id, "What does the backup policy say?").json()

    # Then each marker carries its section's title and counts once for its chunk, document and collection
    citations = answer["answer"]["citations"]
    assert sorted(citation["title"] for citation in citations) == [
        "Backup policy › Restores",
        "Backup policy › Schedule",
    ]
    assert [chunk["cited"] for chunk in _chunks(alice_api, document_id)] == [1, 1]
    assert alice_api.get(f"/kb/documents/{document_id}").json()["cited"] == 2
    assert alice_api.get(f"/kb/collections/{collection.id}").json()["cited"] == 2


def test_reupload_replaces_titles_with_the_new_chunks(make_collection, upload, alice_api):
    # Given the backup policy, ingested
    collection = make_collection()
    document_id = upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown").json()["id"]
    old_ids = set(Chunk.objects.values_list("id", flat=True))

    # When it is uploaded again with its sections renamed
    upload(collection.id, "backups.md", BACKUPS.replace("## Restores", "## Recovery"), content_type="text/markdown")

    # Then its chunks are new, with the new title
    chunks = _chunks(alice_api, document_id)
    assert not old_ids & {chunk["id"] for chunk in chunks}
    assert [chunk["title"] for chunk in chunks] == ["Backup policy › Schedule", "Backup policy › Recovery"]


def test_the_chunk_page_shows_each_title_apart_from_the_text(make_collection, upload, browser_for):
    # Given the backup policy, ingested
    document_id = upload(make_collection().id, "backups.md", BACKUPS, content_type="text/markdown").json()["id"]

    # When alice's browser opens its chunks
    content = browser_for("alice").get(f"/kb/documents/{document_id}/chunks").content.decode()

    # Then each chunk shows its title, and its text starts with its first sentence
    assert 'data-testid="chunk-title">Backup policy › Schedule<' in content
    assert 'data-testid="chunk-text">Backups run every night' in content


def test_the_chunk_page_shows_the_pdf_page_of_each_chunk(make_collection, upload, browser_for):
    # Given a PDF of two pages, ingested
    data = pdf_with_pages([["Backups are kept for one year."], ["Restores are tested monthly."]])
    document_id = upload(make_collection().id, "policy.pdf", data, content_type="application/pdf").json()["id"]

    # When alice's browser opens its chunks
    content = browser_for("alice").get(f"/kb/documents/{document_id}/chunks").content.decode()

    # Then each chunk names its page
    assert "Chunk 1 · page 1" in content
    assert "Chunk 2 · page 2" in content


def test_a_citation_preview_shows_the_title_and_the_page(make_collection, upload, make_chat, ask, browser_for):
    # Given a chat over a PDF whose second page answers, and one over the backup policy
    collection = make_collection()
    data = pdf_with_pages([["Nothing to see here."], ["Restores are tested monthly."]])
    upload(collection.id, "policy.pdf", data, content_type="application/pdf")
    upload(collection.id, "backups.md", BACKUPS, content_type="text/markdown")
    chat = make_chat(collection)

    # When alice asks how often restores are tested and opens the chat
    ask(chat.id, "How often are restores tested?")
    content = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the PDF's preview names page 2, and the Markdown's shows its title apart from the text
    assert "policy.pdf, page 2, chunk 2:" in content
    assert 'data-testid="preview-title">Backup policy › Restores<' in content
    assert '<span class="kb-preview-text">Restores are tested monthly by the on-call engineer.' in content


def test_a_citation_preview_shows_a_list_one_item_per_line(make_collection, upload, make_chat, ask, browser_for):
    # Given a chat over a restore checklist
    collection = make_collection()
    checklist = "# Restore drill\n\n1. Pick a snapshot\n2. Restore it into a scratch database\n3. Time the restore\n"
    upload(collection.id, "drill.md", checklist, content_type="text/markdown")
    chat = make_chat(collection)

    # When alice asks about the drill and opens the chat
    ask(chat.id, "How do I restore a snapshot?")
    content = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the preview shows the items on lines of their own, as the chunk holds them
    assert "1. Pick a snapshot\n2. Restore it into a scratch database\n3. Time the restore</span>" in content


GUIDE = [
    [
        ("Incident escalation guide", 18),
        ("When an incident is declared, the on-call engineer", 11),
        ("pages the incident lead within five minutes.", 11),
        ("Severity levels", 14),
        ("Sev 1 means customers cannot work at all.", 11),
    ],
    [("Sev 2 means a feature is down for some customers.", 11), ("Contacts", 14), ("The lead is on the rota.", 11)],
]


def test_a_pdf_heading_set_larger_than_its_text_titles_what_follows_and_does_not_run_into_it():
    # Given a PDF whose headings are set larger than its text, with no blank line between them
    data = pdf_with_sized_lines(GUIDE)

    # When it is read
    blocks = extract_blocks(data, "pdf", max_chars=10_000)

    # Then each heading titles the text under it, across the page break, nested by size, and no
    # text starts with a heading
    assert [(block.page, block.title, block.text) for block in blocks] == [
        (
            1,
            "Incident escalation guide",
            "When an incident is declared, the on-call engineer pages the incident lead within five minutes.",
        ),
        (1, "Incident escalation guide › Severity levels", "Sev 1 means customers cannot work at all."),
        (2, "Incident escalation guide › Severity levels", "Sev 2 means a feature is down for some customers."),
        (2, "Incident escalation guide › Contacts", "The lead is on the rota."),
    ]
    assert len({block.section for block in blocks}) == 3


def test_a_pdf_set_in_one_size_has_no_headings():
    # Given a PDF whose short lines are all set in the text's size
    data = pdf_with_sized_lines([[("Backups", 12), ("Backups are kept for one year.", 12)]])

    # When it is read / Then its short first line is text, not a heading
    assert [(block.title, block.text) for block in extract_blocks(data, "pdf", max_chars=1000)] == [
        ("", "Backups Backups are kept for one year.")
    ]


def test_a_source_under_an_answer_names_its_pdf_pages_both_when_its_passage_runs_over_two(
    make_collection, upload, make_chat, ask, browser_for
):
    # Given a chat over the escalation guide as a PDF, whose severity section runs over two pages
    collection = make_collection()
    upload(collection.id, "guide.pdf", pdf_with_sized_lines(GUIDE), content_type="application/pdf")
    chat = make_chat(collection)

    # When alice asks what the severity levels mean and opens the chat
    ask(chat.id, "What does Sev 1 mean for customers?")
    content = browser_for("alice").get(f"/kb/chats/{chat.id}").content.decode()

    # Then the source list itself (not only the preview) names the pages of the passage it cites,
    # which runs from the end of page 1 onto page 2, and each chunk under it says its own
    assert re.search(r'\[1\] guide\.pdf, <span data-testid="citation-pages">pages 1–2</span>', content)
    assert "Chunk 2, page 1, of guide.pdf" in content
    assert "Chunk 3, page 2, of guide.pdf" in content
