"""The test settings fail a test whose template reads a variable that does not exist (pyproject.toml)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.template import engines


def test_a_template_reading_a_renamed_attribute_fails_the_test() -> None:
    # Given a template still reading `item.debtor`, a name the item no longer has
    template = engines["django"].from_string("<td>{{ item.debtor }}</td>")

    # When it is rendered for an item that has a payer
    # Then the test fails, naming the variable, instead of rendering an empty cell
    with pytest.raises(pytest.fail.Exception, match=r"Undefined template variable 'item\.debtor'"):
        template.render({"item": SimpleNamespace(payer="alice")})


def test_a_filtered_missing_variable_fails_the_test_too() -> None:
    # Given a missing variable behind a filter
    template = engines["django"].from_string("{{ owner_name|upper }}")

    # When it is rendered without it
    # Then the test fails as well
    with pytest.raises(pytest.fail.Exception, match="owner_name"):
        template.render({})


def test_a_template_reading_existing_variables_renders() -> None:
    # Given a template reading what the context holds, and an `if` on an absent flag
    template = engines["django"].from_string("{{ item.payer }}{% if refused_form %}!{% endif %}")

    # When it is rendered
    rendered = template.render({"item": SimpleNamespace(payer="alice")})

    # Then it renders as usual
    assert rendered == "alice"
