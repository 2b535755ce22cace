"""``Options``: what a refresh or a client is asked to do besides which seeds to ask, in one
frozen dataclass that ``metadata()``, ``metadata_blocking()``, ``AsyncClient`` and ``Client``
all take. It is the one list of the options: those four take an ``Options`` after the seeds,
keyword arguments naming its fields (each replaces that field), or both."""

from __future__ import annotations

import dataclasses
import ssl as _ssl
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence, Union

from ._config import OAuthBearer, Sasl, SessionConfig, seed_list
from .errors import ConfigError

__all__ = ["Options"]

SslOption = Union[_ssl.SSLContext, bool, None]


@dataclass(frozen=True, kw_only=True)
class Options:
    """The options of a refresh or a client (every one optional)::

        options = stagger.Options(ssl=True, sasl=stagger.ScramSha512("app", password), topics=["orders"])
        md = await stagger.metadata(seeds, options)
        md = await stagger.metadata(seeds, options, topics=[])   # a keyword replaces a field

    ``ssl``: an ``ssl.SSLContext``, or ``True`` for ``ssl.create_default_context()``: TLS to
    every broker, each certificate verified against the name the session gives.
    ``sasl``: ``Plain``, ``ScramSha256``, ``ScramSha512`` or ``OAuthBearer``.
    ``settings``: policy knobs by their schema names
    (``{"fanout.stagger.adaptive.silent_tls": "20ms"}``), applied after ``preset``
    (``adaptive``, ``sequential``, ``all-at-once``, ``staggered``).
    ``client_id``: what each request says. ``topics``: the topics to describe (``None``: all;
    ``[]``: brokers only). ``max_frame_size``: the largest response frame (32 MiB by default).
    ``resolve_names``: look seed names up and try each address as a candidate of its own.
    ``seed``: the session's randomness (jitter, the shuffled order of the seeds).

    The types are checked here (``ConfigError`` naming the field); the settings, the preset
    and the frame size are checked by the library when a session is built from them, before
    any broker is contacted. ``settings`` is kept as a read-only copy, ``topics`` as a tuple.
    """

    ssl: SslOption = None
    sasl: Optional[Sasl] = None
    settings: Mapping[str, Any] = field(default_factory=dict, hash=False)
    preset: Optional[str] = None
    client_id: Optional[str] = None
    topics: Optional[Sequence[str]] = None
    max_frame_size: Optional[int] = None
    resolve_names: bool = False
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        if not (self.ssl is None or isinstance(self.ssl, (bool, _ssl.SSLContext))):
            raise ConfigError(f"must be an ssl.SSLContext, True or None, not {type(self.ssl).__name__}", "ssl")
        if self.sasl is not None and not isinstance(self.sasl, Sasl):
            raise ConfigError("must be stagger.Plain, ScramSha256, ScramSha512 or OAuthBearer", "sasl")
        if not isinstance(self.settings, Mapping):
            what = type(self.settings).__name__
            raise ConfigError(f"must be a mapping of knob names to values, not {what}", "settings")
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        for name, kind, what in (
            ("preset", str, "a preset name"),
            ("client_id", str, "a string"),
            ("max_frame_size", int, "a number of bytes"),
            ("seed", int, "an integer"),
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
                raise ConfigError(f"must be {what} or None, not {type(value).__name__}", name)
        if isinstance(self.topics, str):
            raise ConfigError("must be a list of topic names, not one string", "topics")
        if self.topics is not None:
            if not isinstance(self.topics, Iterable):
                raise ConfigError(f"must be a list of topic names, not {type(self.topics).__name__}", "topics")
            object.__setattr__(self, "topics", tuple(self.topics))
        if not isinstance(self.resolve_names, bool):
            raise ConfigError(f"must be True or False, not {type(self.resolve_names).__name__}", "resolve_names")

    def replace(self, **changes: Any) -> "Options":
        """These options with ``changes`` (field names) in place of their fields."""
        return dataclasses.replace(self, **changes)


def given(options: Optional[Options], changes: Mapping[str, Any]) -> Options:
    """A call's options: ``options`` (else the defaults) with its keyword arguments in place of
    their fields; a keyword that names no field raises ``TypeError``, as for any function."""
    if options is None:
        return Options(**changes)
    if not isinstance(options, Options):
        raise ConfigError(f"must be a stagger.Options, not {type(options).__name__}", "options")
    return options.replace(**changes) if changes else options


class Built(NamedTuple):
    config: SessionConfig
    ssl_context: Optional[_ssl.SSLContext]
    token_source: Optional[Callable[[], Any]]
    seed: Optional[int]


def build(seeds: Union[str, Iterable[str]], options: Options, *, one_shot: bool) -> Built:
    """The session config, TLS context, token source and seed of ``options``."""
    if options.ssl is True:
        context: Optional[_ssl.SSLContext] = _ssl.create_default_context()
    elif isinstance(options.ssl, _ssl.SSLContext):
        context = options.ssl
    else:
        context = None
    sasl = options.sasl
    tokens = sasl.token_source if isinstance(sasl, OAuthBearer) else None
    config = SessionConfig(
        seeds=tuple(seed_list(seeds)),
        preset=options.preset,
        settings=options.settings,
        client_id=options.client_id,
        topics=options.topics,
        max_frame_size=options.max_frame_size,
        tls=context is not None,
        sasl=sasl,
        fresh_tokens=tokens is not None,
        one_shot=one_shot,
        resolve_names=options.resolve_names,
    )
    return Built(config, context, tokens, options.seed)
