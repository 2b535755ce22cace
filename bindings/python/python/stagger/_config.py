"""What a session is built from: seeds, policy (a preset and knobs by their schema names),
what to ask (client id, topics), TLS and SASL. Becomes the config JSON of docs/abi.md, which
the library validates whole, naming the field it refuses.

Credentials live in ``Plain``, ``ScramSha256``, ``ScramSha512`` and ``OAuthBearer``, whose
reprs never show them; the config JSON that carries them goes to the library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .errors import ConfigError

__all__ = ["Sasl", "Plain", "ScramSha256", "ScramSha512", "OAuthBearer", "SessionConfig", "PRESETS"]

#: The policies a session can start from (``preset=``); knobs in ``settings`` apply after.
PRESETS = ("adaptive", "sequential", "all-at-once", "staggered")

TokenSource = Callable[[], Union[str, Awaitable[str]]]


class Sasl:
    """A SASL mechanism and its credentials (the base of ``Plain``, ``ScramSha256``,
    ``ScramSha512`` and ``OAuthBearer``)."""

    mechanism: str = ""

    def _json(self) -> Dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


class _UserPassword(Sasl):
    __slots__ = ("username", "_password")

    def __init__(self, username: str, password: str) -> None:
        if not isinstance(username, str) or not isinstance(password, str):
            raise ConfigError("the username and password must be strings", "sasl")
        self.username = username
        self._password = password

    def _json(self) -> Dict[str, Any]:
        return {"mechanism": self.mechanism, "username": self.username, "password": self._password}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(username={self.username!r}, password=<redacted>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _UserPassword) and type(other) is type(self) and (
            (self.username, self._password) == (other.username, other._password)
        )

    def __hash__(self) -> int:
        return hash((type(self), self.username))


class Plain(_UserPassword):
    """SASL/PLAIN (only over TLS, in practice)."""

    mechanism = "PLAIN"


class ScramSha256(_UserPassword):
    """SASL/SCRAM-SHA-256 (RFC 7677); the client nonce comes from ``os.urandom``."""

    mechanism = "SCRAM-SHA-256"


class ScramSha512(_UserPassword):
    """SASL/SCRAM-SHA-512; the client nonce comes from ``os.urandom``."""

    mechanism = "SCRAM-SHA-512"


class OAuthBearer(Sasl):
    """SASL/OAUTHBEARER with a token: a string, or a callable (plain or ``async``) asked for a
    fresh token by every new connection (the session's ``NEED_TOKEN``, answered as a
    ``TOKEN`` event; an exception becomes ``TOKEN_FAILED``, which fails the refresh)."""

    mechanism = "OAUTHBEARER"
    __slots__ = ("_token",)

    def __init__(self, token: Union[str, TokenSource]) -> None:
        if not (isinstance(token, str) or callable(token)):
            raise ConfigError("the token must be a string or a callable returning one", "sasl.token")
        self._token = token

    @property
    def fresh_tokens(self) -> bool:
        """Whether every connection asks the callable for its token."""
        return callable(self._token)

    @property
    def token_source(self) -> Optional[TokenSource]:
        return self._token if callable(self._token) else None

    def _json(self) -> Dict[str, Any]:
        if callable(self._token):
            return {"mechanism": self.mechanism}
        return {"mechanism": self.mechanism, "token": self._token}

    def __repr__(self) -> str:
        what = "<callable>" if callable(self._token) else "<redacted>"
        return f"OAuthBearer(token={what})"


def seed_list(seeds: Union[str, Iterable[str]]) -> List[str]:
    """Seeds as a list: an iterable of ``host:port``, or one comma-separated string (the
    form of Kafka's ``bootstrap.servers``)."""
    if isinstance(seeds, str):
        items = [s.strip() for s in seeds.split(",")]
    else:
        items = [str(s).strip() for s in seeds]
    items = [s for s in items if s]
    if not items:
        raise ConfigError("at least one seed broker (host:port) is needed", "seeds")
    return items


def _setting_text(path: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ConfigError(f"must be a string, a number or a boolean, not {type(value).__name__}", f"settings.{path}")


@dataclass(frozen=True)
class SessionConfig:
    """A session's config (docs/abi.md, "The config JSON").

    ``settings`` maps knob paths, exactly as ``stagger knobs`` lists them, to their text:
    ``{"fanout.stagger.adaptive.silent_tls": "20ms", "retry.retries": 0}``; they apply after
    ``preset``. ``tls`` says the host speaks TLS (the ``DIAL`` actions then carry the name to
    verify); ``one_shot`` is one refresh only (the winner's connection closed), otherwise a
    long-lived session keeps a connection and refreshes every ``refresh_interval`` by itself.
    Either shuffles the seeds by the session's seed, as librdkafka, the Java client, franz-go
    and Sarama do; the setting ``{"shuffle_seeds": False}`` keeps the order written.
    """

    seeds: Sequence[str]
    preset: Optional[str] = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    client_id: Optional[str] = None
    topics: Optional[Sequence[str]] = None
    max_frame_size: Optional[int] = None
    tls: bool = False
    sasl: Optional[Sasl] = None
    fresh_tokens: bool = False
    one_shot: bool = False
    resolve_names: bool = False

    def to_json(self) -> bytes:
        """The config JSON. It carries the credentials: hand it to the library, never log it."""
        doc: Dict[str, Any] = {"seeds": list(self.seeds)}
        if self.preset is not None:
            doc["preset"] = self.preset
        if self.settings:
            doc["settings"] = {str(k): _setting_text(str(k), v) for k, v in self.settings.items()}
        if self.client_id is not None:
            doc["client_id"] = self.client_id
        if self.topics is not None:
            if isinstance(self.topics, str):
                raise ConfigError("must be a list of topic names, not one string", "topics")
            doc["topics"] = list(self.topics)
        if self.max_frame_size is not None:
            doc["max_frame_size"] = self.max_frame_size
        if self.tls:
            doc["tls"] = True
        if self.sasl is not None:
            if not isinstance(self.sasl, Sasl):
                raise ConfigError("must be Plain, ScramSha256, ScramSha512 or OAuthBearer", "sasl")
            doc["sasl"] = self.sasl._json()
        if self.fresh_tokens:
            doc["fresh_tokens"] = True
        if self.one_shot:
            doc["one_shot"] = True
        if self.resolve_names:
            doc["resolve_names"] = True
        return json.dumps(doc).encode()
