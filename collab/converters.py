"""Path converters: `<id:...>`, a row id the database can hold, or no match (a 404); and
`<filepath:...>`, a file path that may hold any character.

Django's `<int:...>` matches any run of digits, and a number past the 64-bit key range then fails
inside the database driver (a 500 on SQLite's "Python int too large", "out of range" on
PostgreSQL). Every route that takes a row id uses this converter instead; imported by each URL
module that does, so it is registered before their patterns are built.
"""

from __future__ import annotations

from django.urls import register_converter

# The largest BigAutoField value (a signed 64-bit integer).
ROW_ID_MAX = 2**63 - 1


def is_row_id(value: int) -> bool:
    return 0 < value <= ROW_ID_MAX


class RowIdConverter:
    regex = "[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        number = int(value)
        if not is_row_id(number):
            raise ValueError(f"{value} is outside the key range")  # no match: the URL resolves to 404
        return number

    def to_url(self, value: int) -> str:
        return str(value)


register_converter(RowIdConverter, "id")


class FilePathConverter:
    """Django's `<path:...>` is `.+`, and `.` matches no newline: a file named with one (sandbox
    code can make it) could then be neither linked from a page (a 500) nor read or deleted (404)."""

    regex = "[\\s\\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(FilePathConverter, "filepath")
