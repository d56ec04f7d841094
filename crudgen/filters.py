"""Data-field filters: a django-filter FilterSet generated from a model's scalar fields.

Registering a model finds its scalar fields (str, int, float, bool, an Enum or a Literal, each
possibly optional) and gives each the lookups `exact`, `in`, `range` (not for booleans and
choices), `contains` (strings) and, where the field may be None, `isnull`, named as django-filter
names them: `title`, `title__in=a,b`, `priority__range=1,5`, `title__contains=mi`,
`note__isnull=true`. The FilterSet parses and validates a query string; what it accepts becomes
`DataFilter` values that every storage evaluates with the same meaning: in SQL on DjangoStorage
(`crudgen.storage.database`), in Python (`passes`) on the others.

The meaning, everywhere: strings compare by code point (PostgreSQL with the "C" collation, SQLite
byte-wise, Python natively) and `contains` is case-sensitive; a value that is None matches no
comparison, only `isnull=true`; a range is inclusive and an empty side of it is open.
"""

from __future__ import annotations

import enum
import functools
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import django_filters
from django import forms
from django.http import QueryDict

from crudgen.errors import ValidationFailed
from crudgen.params import LIST_QUERY_PARAMETERS, parse_bool
from crudgen.schema import model_fields
from crudgen.types import DataFilter

#: Names the list routes already use; a field named like one of them gets no filter.
RESERVED_PARAMETERS = frozenset({*LIST_QUERY_PARAMETERS, "is_deleted", "shape", "format"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# SQLite binds integers as 64-bit; a bound past that range would be an OverflowError, not a 422.
_INT_LIMITS = {"min_value": -(2**63), "max_value": 2**63 - 1}
Kind = Literal["str", "int", "float", "bool"]
#: An `in` list longer than this is refused (422). Sent as repeated keys, each value is one query
#: field, and Django refuses a query of more than 1000 fields (DATA_UPLOAD_MAX_NUMBER_FIELDS)
#: before crudgen sees it, so the bound leaves room for several lists in one query.
MAX_IN_VALUES = 100


@dataclass(frozen=True)
class FilterableField:
    """A scalar model field: how its stored JSON value compares, and which lookups it offers."""

    name: str
    kind: Kind
    nullable: bool
    choices: tuple[Any, ...] | None = None

    @property
    def lookups(self) -> tuple[str, ...]:
        offered = ["exact", "in"]
        if self.kind in ("str", "int", "float") and self.choices is None:
            offered.append("range")
        if self.kind == "str" and self.choices is None:
            offered.append("contains")
        if self.nullable:
            offered.append("isnull")
        return tuple(offered)

    def checked(self, data_filter: DataFilter) -> DataFilter:
        """The filter with its value checked against this field (a ValueError names what is wrong)."""
        lookup, value = data_filter.lookup, data_filter.value
        if lookup not in self.lookups:
            raise ValueError(f"{self.name} offers {', '.join(self.lookups)}, not {lookup}")
        if lookup == "isnull":
            if not isinstance(value, bool):
                raise ValueError(f"{data_filter.parameter} takes true or false")
            return data_filter
        if lookup == "in":
            if not isinstance(value, list | tuple | set | frozenset):
                raise ValueError(f"{data_filter.parameter} takes a list of values")
            if len(value) > MAX_IN_VALUES:
                raise ValueError(f"{data_filter.parameter} takes at most {MAX_IN_VALUES} values")
            return DataFilter(self.name, lookup, [self._scalar(item, data_filter) for item in value])
        if lookup == "range":
            if not isinstance(value, list | tuple) or len(value) != 2:
                raise ValueError(f"{data_filter.parameter} takes a (low, high) pair")
            low, high = (None if bound is None else self._scalar(bound, data_filter) for bound in value)
            return DataFilter(self.name, lookup, (low, high))
        return DataFilter(self.name, lookup, self._scalar(value, data_filter))

    def _scalar(self, value: Any, data_filter: DataFilter) -> Any:
        if isinstance(value, enum.Enum):
            value = value.value
        accepted = {
            "str": isinstance(value, str),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, int | float) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
        }[self.kind]
        if not accepted or (self.choices is not None and value not in self.choices):
            raise ValueError(f"{data_filter.parameter}: {value!r} is not a value of {self.name}")
        return value


def _unwrapped(hint: Any) -> tuple[Any, bool]:
    """The type behind Annotated and Optional, and whether None is allowed."""
    while get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    if get_origin(hint) in (Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(members) != 1:
            return None, False
        inner, _ = _unwrapped(members[0])
        return inner, True
    return hint, False


def _choices_kind(values: Sequence[Any]) -> Kind | None:
    if values and all(isinstance(v, str) for v in values):
        return "str"
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int"
    return None


def _filterable(name: str, hint: Any) -> FilterableField | None:
    inner, nullable = _unwrapped(hint)
    if inner is None:
        return None
    if get_origin(inner) is Literal:
        values = get_args(inner)
        kind = _choices_kind(values)
        return FilterableField(name, kind, nullable, tuple(values)) if kind else None
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        values = tuple(member.value for member in inner)
        kind = _choices_kind(values)
        return FilterableField(name, kind, nullable, values) if kind else None
    kinds: dict[Any, Kind] = {bool: "bool", int: "int", float: "float", str: "str"}
    kind = kinds.get(inner)
    return FilterableField(name, kind, nullable) if kind else None


def filterable_fields(model: type) -> dict[str, FilterableField]:
    """The model's scalar fields that get filters (a field named like a list parameter does not)."""
    found = {}
    for name, hint in model_fields(model).items():
        if name in RESERVED_PARAMETERS or not _IDENTIFIER.match(name):
            continue
        field = _filterable(name, hint)
        if field is not None:
            found[name] = field
    return found


# -- the FilterSet ------------------------------------------------------------------------------


class StrictBooleanField(forms.Field):
    """`true`/`false` (also `1`/`0`, `yes`/`no`); anything else is an error, never silently ignored."""

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        try:
            return parse_bool(str(value))
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="invalid") from exc


class BooleanFilter(django_filters.Filter):
    field_class = StrictBooleanField


class IntegerFilter(django_filters.Filter):
    field_class = forms.IntegerField


class FloatFilter(django_filters.Filter):
    field_class = forms.FloatField


class TypedChoiceFilter(django_filters.TypedChoiceFilter):
    pass


_BASE_FILTERS: dict[Kind, type[django_filters.Filter]] = {
    "str": django_filters.CharFilter,
    "int": IntegerFilter,
    "float": FloatFilter,
    "bool": BooleanFilter,
}


def _filter_for(field: FilterableField, lookup: str) -> django_filters.Filter:
    # No model behind these filters: the label is given so django-filter never looks one up.
    kwargs: dict[str, Any] = {"field_name": field.name, "lookup_expr": lookup, "label": field.name}
    if lookup == "isnull":
        return BooleanFilter(**kwargs)
    base: type[django_filters.Filter] = _BASE_FILTERS[field.kind]
    if field.choices is not None:
        base = TypedChoiceFilter
        kwargs["choices"] = [(value, str(value)) for value in field.choices]
        kwargs["coerce"] = int if field.kind == "int" else str
    elif field.kind == "int":
        kwargs.update(_INT_LIMITS)
    if lookup in ("in", "range"):
        csv_base = django_filters.BaseInFilter if lookup == "in" else django_filters.BaseRangeFilter
        base = type(f"{base.__name__}{lookup.title()}", (csv_base, base), {})
    return base(**kwargs)


@functools.lru_cache(maxsize=512)
def _form_class(filterset: type[DataFilterSet], names: tuple[str, ...]) -> type[forms.Form]:
    """A form of only the filters a query names: Django deep-copies a form's fields per request."""
    fields = {name: filterset.base_filters[name].field for name in names}
    return type(f"{filterset.__name__}Form", (filterset._meta.form,), fields)


class DataFilterSet(django_filters.FilterSet):
    """Parses a query string into `DataFilter`s; subclasses are generated per registered model.

    These filters only parse (no queryset, no model), so they are shared by every request instead
    of being deep-copied by django-filter's constructor, and each request's form holds only the
    filters its query names.
    """

    fields_by_name: typing.ClassVar[dict[str, FilterableField]] = {}

    def __init__(self, data: Any = None, queryset: Any = None, *, request: Any = None, prefix: Any = None) -> None:
        self.is_bound = data is not None
        self.data = data if data is not None else QueryDict()
        self.queryset = queryset
        self.request = request
        self.form_prefix = prefix

    @property
    def filters(self) -> dict[str, django_filters.Filter]:  # type: ignore[override]
        return self.base_filters

    def get_form_class(self) -> type[forms.Form]:
        return _form_class(type(self), tuple(sorted(name for name in self.data if name in self.base_filters)))

    def data_filters(self) -> tuple[DataFilter, ...]:
        """The accepted filters, or ValidationFailed (422) naming each bad or unknown one."""
        errors = {name: " ".join(str(e) for e in messages) for name, messages in self.errors.items()}
        errors.update(self._unknown())
        errors.update(self._empty())
        if errors:
            raise ValidationFailed(errors)
        found = []
        for name, value in self.form.cleaned_data.items():
            if value is None or value == "" or value == []:
                continue
            spec = self.filters[name]
            field = self.fields_by_name[spec.field_name]
            if spec.lookup_expr == "range":
                # An empty side is open ("1," or ",5"), for strings too.
                value = tuple(None if bound in (None, "") else bound for bound in value)
                if value == (None, None):
                    continue
            try:
                found.append(field.checked(DataFilter(spec.field_name, spec.lookup_expr, value)))
            except ValueError as exc:
                errors[name] = str(exc)
        if errors:
            raise ValidationFailed(errors)
        return tuple(found)

    def _empty(self) -> dict[str, str]:
        """A typed filter (a number, a boolean, one of a set of choices, `isnull`) given no value is
        refused, as the document says, rather than read as no filter; a string filter may be empty."""
        problems = {}
        for name in self.data:
            spec = self.filters.get(name)
            if spec is None or self.data.get(name) != "":
                continue
            field = self.fields_by_name[spec.field_name]
            if field.kind != "str" or field.choices is not None or spec.lookup_expr == "isnull":
                problems[name] = "must not be empty (leave the parameter out for no filter)"
        return problems

    def _unknown(self) -> dict[str, str]:
        """A parameter naming a model field that has no such filter is refused, not silently ignored."""
        problems = {}
        for name in self.data:
            field, _, lookup = name.partition("__")
            if name in self.filters or field not in self.fields_by_name:
                continue
            offered = ", ".join(self.fields_by_name[field].lookups)
            problems[name] = f"{lookup or 'exact'} is not a filter of {field} (it offers {offered})"
        return problems


def build_filterset(resource_name: str, fields: Mapping[str, FilterableField]) -> type[DataFilterSet]:
    """A FilterSet class with one filter per field and lookup, named as django-filter names them."""
    declared: dict[str, Any] = {"fields_by_name": dict(fields)}
    for field in fields.values():
        for lookup in field.lookups:
            name = field.name if lookup == "exact" else f"{field.name}__{lookup}"
            declared[name] = _filter_for(field, lookup)
    class_name = "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", resource_name)) + "FilterSet"
    return type(class_name, (DataFilterSet,), declared)


# -- evaluation in Python ----------------------------------------------------------------------


def _compares(value: Any, data_filter: DataFilter) -> bool:
    lookup, wanted = data_filter.lookup, data_filter.value
    if lookup == "isnull":
        return (value is None) == wanted
    if value is None:
        return False
    try:
        if lookup == "exact":
            return value == wanted
        if lookup == "in":
            return value in wanted
        if lookup == "contains":
            return isinstance(value, str) and wanted in value
        low, high = wanted
        return (low is None or value >= low) and (high is None or value <= high)
    except TypeError:  # a stored value of another type (e.g. data written before a schema change)
        return False


def passes(data: Mapping[str, Any], data_filters: Iterable[DataFilter]) -> bool:
    """Whether stored data passes every filter: the Python twin of DjangoStorage's SQL."""
    return all(_compares(data.get(f.field), f) for f in data_filters)
