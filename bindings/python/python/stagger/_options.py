"""The options the asyncio and blocking APIs share, turned into a session config, the TLS
context and the token source."""

from __future__ import annotations

import ssl as _ssl
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Union

from ._config import OAuthBearer, Sasl, SessionConfig, seed_list
from .errors import ConfigError

SslOption = Union[_ssl.SSLContext, bool, None]


class Built(NamedTuple):
    config: SessionConfig
    ssl_context: Optional[_ssl.SSLContext]
    token_source: Optional[Callable[[], Any]]


def build(
    seeds: Union[str, Iterable[str]],
    *,
    one_shot: bool,
    ssl: SslOption = None,
    sasl: Optional[Sasl] = None,
    settings: Optional[Mapping[str, Any]] = None,
    preset: Optional[str] = None,
    client_id: Optional[str] = None,
    topics: Optional[Iterable[str]] = None,
    max_frame_size: Optional[int] = None,
    resolve_names: bool = False,
) -> Built:
    if ssl is True:
        context: Optional[_ssl.SSLContext] = _ssl.create_default_context()
    elif ssl is None or ssl is False:
        context = None
    elif isinstance(ssl, _ssl.SSLContext):
        context = ssl
    else:
        raise ConfigError(f"must be an ssl.SSLContext, True or None, not {type(ssl).__name__}", "ssl")
    if sasl is not None and not isinstance(sasl, Sasl):
        raise ConfigError("must be stagger.Plain, ScramSha256, ScramSha512 or OAuthBearer", "sasl")
    if isinstance(topics, str):
        raise ConfigError("must be a list of topic names, not one string", "topics")
    tokens = sasl.token_source if isinstance(sasl, OAuthBearer) else None
    config = SessionConfig(
        seeds=tuple(seed_list(seeds)),
        preset=preset,
        settings=dict(settings or {}),
        client_id=client_id,
        topics=None if topics is None else tuple(topics),
        max_frame_size=max_frame_size,
        tls=context is not None,
        sasl=sasl,
        fresh_tokens=tokens is not None,
        one_shot=one_shot,
        resolve_names=resolve_names,
    )
    return Built(config, context, tokens)
