"""Records built from values already known to be valid, without pydantic's machinery.

A restore builds two records per entry of the view (the message and its view entry)
from values it has just checked. ``model_construct`` would do, but it looks up aliases
and defaults for every field of every record; :func:`trusted` sets the same attributes
directly. It is for the library's own frozen records only: no aliases, no private
attributes, no ``model_post_init``, every field given (a test holds it equal to
``model_construct``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from keyword import iskeyword
from types import UnionType
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["builder", "maker", "trusted"]

_M = TypeVar("_M", bound=BaseModel)
# The instance-dict slot every model has (``BaseModel.__slots__`` names it), set directly:
# a model may put a ``__dict__`` property of its own in front of it (a restored
# ``Message`` decodes its content through one).
_set_dict = BaseModel.__dict__["__dict__"].__set__
# The other slots, set through their own descriptors: no attribute lookup through the
# class's MRO on each set (a fifth of what building a record costs here).
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_new = object.__new__  # what ``cls.__new__`` is for every pydantic model (BaseModel defines none)
# One fields-set per class, shared by every instance built here: each instance has every
# field set, so the sets would all be equal, and a set of five names costs 728 bytes --
# more than the entry's own values. Pydantic never changes it in place on a frozen model
# (``model_copy`` copies it first), and adding a field name already in it changes nothing.
_FIELDS_SET: dict[type[BaseModel], set[str]] = {}


def trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.model_construct(**values)``, for ``values`` holding every field of ``cls`` in its order.

    The dict becomes the instance's ``__dict__`` (the caller hands over a new one);
    every field counts as set, as with the constructor given each. The instance's
    fields-set is one set shared by every instance of ``cls`` built here (the same
    names each time), never changed in place.
    """
    instance = _new(cls)
    _set_dict(instance, values)
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None or len(fields_set) != len(values):
        fields_set = _FIELDS_SET.setdefault(cls, set(cls.model_fields))
        if fields_set != values.keys():
            fields_set = set(values)  # not every field: the caller broke the contract; stay correct
    _set_fields_set(instance, fields_set)
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def maker(cls: type[_M]) -> Callable[[dict[str, Any]], _M]:
    """:func:`trusted` for ``cls`` alone, for a hot path whose dict literal names every field in its order.

    The record built is the one :func:`trusted` builds; the class's fields-set is looked up
    once here instead of on every call, and not checked against the values (a test of each
    record built this way holds it equal to the validated one, ``model_fields_set`` included).
    """
    fields_set = _FIELDS_SET.setdefault(cls, set(cls.model_fields))

    def make(values: dict[str, Any]) -> _M:
        instance = _new(cls)
        _set_dict(instance, values)
        _set_fields_set(instance, fields_set)
        _set_extra(instance, None)
        _set_private(instance, None)
        return instance

    make.__doc__ = f"``trusted({cls.__name__}, values)`` for a dict naming every field (see :func:`maker`)."
    return make


def _check(name: str, annotation: Any, scope: dict[str, Any]) -> str:
    """The Python test that ``name`` holds a value of exactly ``annotation`` (as a row written by the library holds).

    Raises:
        TypeError: ``annotation`` is not one the builders know (a field of a new kind must
            say here how a row's value is checked, rather than be taken unchecked).
    """
    args = get_args(annotation)
    if get_origin(annotation) is Literal and args and all(type(a) is str for a in args):
        choices = " or ".join(f"{name} == {a!r}" for a in args)
        return f"({choices}) and type({name}) is str"
    if get_origin(annotation) in (Union, UnionType) and len(args) == 2 and type(None) in args:
        inner = next(a for a in args if a is not type(None))
        return f"({name} is None or {_check(name, inner, scope)})"
    if annotation in (str, int, bool, float, datetime):
        scope[annotation.__name__] = annotation
        return f"type({name}) is {annotation.__name__}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        scope[annotation.__name__] = annotation
        return f"isinstance({name}, {annotation.__name__})"
    raise TypeError(f"no exact check for a field of type {annotation!r} ({name})")


def builder(cls: type[_M], given: tuple[str, ...], start: int = 0) -> Callable[..., _M]:
    """A function building ``cls`` from values given positionally, fast when they have exactly the fields' types.

    It takes the fields named in ``given``, in that order, and -- when they are not
    every field -- then a ``row`` holding the other fields in the record's order from
    position ``start`` to its end. Values of exactly the fields' types (``type(v) is int``, a
    string of a ``Literal``'s choices, ``None`` or the type for an optional field) are
    taken as they are (:func:`trusted`); anything else is validated by the constructor,
    and refused as it refuses it. The function is generated once, from the record's
    fields, so a field added to the record is built, checked and taken from the row
    with nothing else changed; a stream of rows pays no per-row loop over the fields.

    Raises:
        TypeError: A field's type has no exact check (see :func:`_check`), ``given``
            names a field ``cls`` lacks, or a field bears a name the generated code uses
            (or one that is not a plain identifier: the source is made only of them).
    """
    fields = list(cls.model_fields)
    unknown = [name for name in given if name not in fields]
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {unknown}")
    clashing = [
        name
        for name in fields
        if name in {"row", "cls", "trusted", "build"}
        or name.startswith("_")
        or not name.isidentifier()
        or iskeyword(name)
    ]
    if clashing:
        raise TypeError(f"{cls.__name__} fields named as the generated code's own names: {clashing}")
    rest = [name for name in fields if name not in given]
    scope: dict[str, Any] = {"cls": cls, "trusted": trusted}
    params = [*given, "row"] if rest else list(given)
    lines = [f"def build({', '.join(params)}):"]
    if rest:  # one unpacking of the whole row (the row must hold exactly these): fastest per row
        lines.append(f"    {', '.join([*(f'_{i}' for i in range(start)), *rest])}, = row")
    checks = " and ".join(f"({_check(name, cls.model_fields[name].annotation, scope)})" for name in fields)
    values = ", ".join(f"{name!r}: {name}" for name in fields)
    keywords = ", ".join(f"{name}={name}" for name in fields)
    lines += [f"    if {checks}:", f"        return trusted(cls, {{{values}}})", f"    return cls({keywords})"]
    exec("\n".join(lines), scope)  # the source is made here from the record's own field names
    build: Callable[..., _M] = scope["build"]
    build.__doc__ = f"``{cls.__name__}(...)`` of {', '.join(params)} (see :func:`contextledger.model.trusted.builder`)."
    return build
