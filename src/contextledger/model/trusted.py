"""Records built from values already known to be valid, without pydantic's machinery.

A restore builds two records per entry of the view (the message and its view entry)
from values it has just checked. ``model_construct`` would do, but it looks up aliases
and defaults for every field of every record; :func:`trusted` sets the same attributes
directly. It is for the library's own frozen records only: no aliases, no private
attributes, no ``model_post_init``, every field given (a test holds it equal to
``model_construct``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["trusted"]

_M = TypeVar("_M", bound=BaseModel)
_set = object.__setattr__  # the models are frozen: their own __setattr__ refuses
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
    instance = cls.__new__(cls)
    _set(instance, "__dict__", values)
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None or len(fields_set) != len(values):
        fields_set = _FIELDS_SET.setdefault(cls, set(cls.model_fields))
        if fields_set != values.keys():
            fields_set = set(values)  # not every field: the caller broke the contract; stay correct
    _set(instance, "__pydantic_fields_set__", fields_set)
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance
