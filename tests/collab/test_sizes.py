"""One display format for amounts of bytes on every page and in every message."""

from __future__ import annotations

import pytest

from collab.sizes import format_bytes
from collab.templatetags.workspace_tags import human_size


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (900, "900 bytes"),
        (1024, "1 KB"),
        (1536, "1.5 KB"),
        (512 * 1024**2, "512 MB"),
        (int(957.3 * 1024**2), "957.3 MB"),
        (1024**3 - 1, "1 GB"),
        (2 * 1024**4, "2 TB"),
    ],
)
def test_bytes_read_with_one_unit_and_a_decimal_only_where_it_is_not_whole(value, shown):
    # Given an amount of bytes / When it is shown / Then it reads in the one display format
    assert format_bytes(value) == shown


def test_the_template_filter_shows_bytes_in_the_same_format_and_nothing_for_none():
    # Given the filter every template uses / When it gets a size or None / Then it reads as format_bytes
    assert human_size(3 * 1024**2) == "3 MB"
    assert human_size(None) == ""
