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


def trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls.model_construct(**values)``, for ``values`` holding every field of ``cls`` in its order.

    The dict becomes the instance's ``__dict__`` (the caller hands over a new one);
    every field counts as set, as with the constructor given each.
    """
    instance = cls.__new__(cls)
    _set(instance, "__dict__", values)
    _set(instance, "__pydantic_fields_set__", set(values))
    _set(instance, "__pydantic_extra__", None)
    _set(instance, "__pydantic_private__", None)
    return instance
