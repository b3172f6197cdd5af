"""Manager options as pydantic models, validated on construction and on every assignment.

Each built-in manager keeps its options in one model with ``validate_assignment=True``
and exposes every field as an attribute through :class:`Option`, so
``manager.per_turn = 3`` works at run time, is validated, and an invalid value raises
:class:`~contextledger.errors.ConfigurationError` and leaves the option as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Generic, Protocol, TypedDict, TypeVar, cast, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextledger.errors import ConfigurationError
from contextledger.managers.base import ProtectedMessages
from contextledger.managers.summarizers import Summarizer

__all__ = [
    "DEFAULT_COMPRESSION_THRESHOLD",
    "Option",
    "PolicyOptions",
    "ProactiveCompression",
    "ProactiveCompressionConfig",
    "ProtectedSpec",
    "SlidingWindowOptions",
    "SummarizingOptions",
    "TurnWindowOptions",
    "describe",
    "parse_proactive_compression",
    "parse_protected_messages",
]

DEFAULT_COMPRESSION_THRESHOLD = 0.7
"""The share of the context window at which ``proactive_compression=True`` compresses."""


class ProactiveCompressionConfig(TypedDict):
    """``proactive_compression={"compression_threshold": 0.8}``: compress at 80% of the window."""

    compression_threshold: float


ProactiveCompression = bool | ProactiveCompressionConfig | Mapping[str, Any] | None
ProtectedSpec = ProtectedMessages | Mapping[str, Any] | None


def parse_proactive_compression(value: object) -> float | None:
    """Validate a ``proactive_compression`` option and return its threshold.

    Args:
        value: ``None``/``False`` (off), ``True`` (threshold
            :data:`DEFAULT_COMPRESSION_THRESHOLD`), or ``{"compression_threshold": x}``
            with ``0 < x <= 1``.

    Returns:
        The threshold, or ``None`` when proactive compression is off.

    Raises:
        ConfigurationError: Any other value.
    """
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_COMPRESSION_THRESHOLD
    if isinstance(value, Mapping):
        unknown = set(value) - {"compression_threshold"}
        if unknown:
            raise ConfigurationError(
                f"proactive_compression: unknown keys {sorted(map(str, unknown))}; only 'compression_threshold'"
            )
        threshold = value.get("compression_threshold", DEFAULT_COMPRESSION_THRESHOLD)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise ConfigurationError(
                f"proactive_compression: compression_threshold must be a number in (0, 1], got {threshold!r}"
            )
        return float(threshold)
    raise ConfigurationError(
        f"proactive_compression must be None, a bool or {{'compression_threshold': x}}, got {value!r}"
    )


def parse_protected_messages(value: object) -> ProtectedMessages:
    """Validate a ``protected_messages`` option (``{"first": N, "last": M}`` or :class:`ProtectedMessages`).

    Raises:
        ConfigurationError: Not a mapping/``ProtectedMessages``, unknown keys, or negative counts.
    """
    if value is None:
        return ProtectedMessages()
    if isinstance(value, ProtectedMessages):
        return value
    if isinstance(value, Mapping):
        try:
            return ProtectedMessages.model_validate(dict(value))
        except ValidationError as exc:
            raise ConfigurationError(f"protected_messages: {describe(exc)}") from exc
    raise ConfigurationError(f"protected_messages must be {{'first': N, 'last': M}}, got {value!r}")


def describe(exc: ValidationError) -> str:
    """The first validation error as ``where: what (got value)``."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or "value"
    message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
    got = "" if error.get("type") == "value_error" else f" (got {error.get('input')!r:.80})"
    return f"{where}: {message}{got}"


_OPTIONS = ConfigDict(
    validate_assignment=True, extra="forbid", strict=True, arbitrary_types_allowed=True, defer_build=True
)


class PolicyOptions(BaseModel):
    """Options every built-in manager takes.

    Attributes:
        proactive_compression: ``None``/``False``, ``True`` or ``{"compression_threshold": x}``.
        protected_messages: The protected first/last ranges (a dict is accepted).
    """

    model_config = _OPTIONS

    proactive_compression: Any = None
    protected_messages: ProtectedMessages = Field(default_factory=ProtectedMessages)

    @field_validator("proactive_compression", mode="before")
    @classmethod
    def _check_compression(cls, value: object) -> object:
        parse_proactive_compression(value)
        return value

    @field_validator("protected_messages", mode="before")
    @classmethod
    def _check_protected(cls, value: object) -> ProtectedMessages:
        return parse_protected_messages(value)


class SlidingWindowOptions(PolicyOptions):
    """Options of :class:`~contextledger.managers.SlidingWindowConversationManager`."""

    window_size: int = Field(default=40, ge=1)
    should_truncate_results: bool = True
    per_turn: bool | Annotated[int, Field(ge=1)] = False
    truncate_threshold: int = Field(default=2000, ge=100)


class SummarizingOptions(PolicyOptions):
    """Options of :class:`~contextledger.managers.SummarizingConversationManager`."""

    summary_ratio: float = Field(default=0.3, gt=0, le=1)
    preserve_recent_messages: int = Field(default=10, ge=0)
    summarizer: Summarizer

    @field_validator("summary_ratio", mode="before")
    @classmethod
    def _ratio_is_a_number(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    @field_validator("summarizer", mode="before")
    @classmethod
    def _callable(cls, value: object) -> object:
        if not callable(value):
            raise ValueError(f"summarizer must be a callable (list[Message]) -> str, got {value!r}")
        return value


class TurnWindowOptions(PolicyOptions):
    """Options of :class:`~contextledger.managers.TurnWindowConversationManager`."""

    max_user_turns: int = Field(ge=1)
    remove_tool_messages: bool = False


class _HasOptions(Protocol):
    @property
    def options(self) -> BaseModel: ...  # read-only here, so a subclass's own options model matches


GetT = TypeVar("GetT")
SetT = TypeVar("SetT")


class Option(Generic[GetT, SetT]):
    """A manager attribute backed by a field of its ``options`` model (validated on assignment)."""

    name: str = ""

    def __set_name__(self, owner: type, name: str) -> None:
        """Remember the field name (the attribute's)."""
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Option[GetT, SetT]: ...
    @overload
    def __get__(self, obj: _HasOptions, owner: type | None = None) -> GetT: ...
    def __get__(self, obj: _HasOptions | None, owner: type | None = None) -> GetT | Option[GetT, SetT]:
        """The option's current value."""
        if obj is None:
            return self
        return cast(GetT, getattr(obj.options, self.name))

    def __set__(self, obj: _HasOptions, value: SetT) -> None:
        """Validate and set the option.

        Raises:
            ConfigurationError: The value is invalid; the option keeps its old value.
        """
        try:
            setattr(obj.options, self.name, value)
        except ValidationError as exc:
            raise ConfigurationError(describe(exc)) from exc
