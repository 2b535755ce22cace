"""stagger: Kafka metadata refresh that staggers across brokers, for Python.

Ask one broker; if no answer comes within a short, adaptive delay, ask another as well; the
first good answer wins, the rest are cancelled, and a bounded retry loop finally gives up with
the last error and every broker's. The policy and the whole Kafka conversation (ApiVersions,
SASL, Metadata) are the stagger core, through its one C ABI; this package only moves bytes.

Three layers, like h11:

* ``stagger.Session``: sans-IO, ``step(now_ns, events) -> (actions, next_wakeup_ns)``, for
  anyone with their own loop.
* asyncio: ``await stagger.metadata(seeds)`` and ``stagger.AsyncClient``.
* blocking: ``stagger.metadata_blocking(seeds)`` and ``stagger.Client``.

``stagger.bootstrap_servers(seeds)`` (and ``bootstrap_servers_blocking``) hand another Kafka
client an ordered list that starts with a broker that answers.
"""

from ._abi import abi_version
from ._config import PRESETS, OAuthBearer, Plain, Sasl, ScramSha256, ScramSha512, SessionConfig
from ._types import (
    AttemptError,
    AttemptReport,
    Broker,
    BrokerFailure,
    Metadata,
    Partition,
    RefreshRecord,
    Report,
    SessionStats,
    Topic,
)
from ._wire import (
    ABI_VERSION,
    DEFAULT_MAX_FRAME_SIZE,
    Action,
    Actions,
    BatchError,
    Cause,
    Close,
    Closed,
    Connected,
    Dial,
    ErrorKind,
    Event,
    IoError,
    NeedNonce,
    NeedToken,
    Nonce,
    RawEvent,
    Rebootstrapped,
    Received,
    Refreshed,
    RefreshFailed,
    RefreshRequested,
    RequestRefresh,
    Resolve,
    Resolved,
    ResolveFailed,
    Secured,
    Send,
    Token,
    TokenFailed,
    decode_actions,
    encode_events,
)
from .aio import AsyncClient, bootstrap_servers, metadata
from .blocking import Client, bootstrap_servers_blocking, metadata_blocking
from .errors import (
    AbiError,
    AbiVersionError,
    ArgumentError,
    ClosedError,
    ConfigError,
    MalformedBatchError,
    PanicError,
    PoisonedError,
    RefreshError,
    StaggerError,
    UnknownHandleError,
)
from .session import Session

try:
    from importlib.metadata import version as _version

    __version__ = _version("stagger-kafka")
except Exception:  # pragma: no cover - not installed as a distribution
    __version__ = "0.0.0"

__all__ = [
    # one refresh, and the long-lived clients
    "metadata",
    "metadata_blocking",
    "bootstrap_servers",
    "bootstrap_servers_blocking",
    "AsyncClient",
    "Client",
    # options
    "Sasl",
    "Plain",
    "ScramSha256",
    "ScramSha512",
    "OAuthBearer",
    "PRESETS",
    # results
    "Metadata",
    "Broker",
    "Topic",
    "Partition",
    "AttemptReport",
    "AttemptError",
    "BrokerFailure",
    "Report",
    "RefreshRecord",
    "SessionStats",
    # errors
    "StaggerError",
    "ConfigError",
    "RefreshError",
    "ClosedError",
    "AbiError",
    "AbiVersionError",
    "MalformedBatchError",
    "UnknownHandleError",
    "PoisonedError",
    "PanicError",
    "ArgumentError",
    # sans-IO
    "Session",
    "SessionConfig",
    "Event",
    "Action",
    "Actions",
    "Connected",
    "Secured",
    "Received",
    "Closed",
    "IoError",
    "Resolved",
    "ResolveFailed",
    "Nonce",
    "Token",
    "TokenFailed",
    "RequestRefresh",
    "RawEvent",
    "Dial",
    "Send",
    "Close",
    "Resolve",
    "NeedNonce",
    "NeedToken",
    "Refreshed",
    "RefreshFailed",
    "Rebootstrapped",
    "RefreshRequested",
    "ErrorKind",
    "Cause",
    "BatchError",
    "encode_events",
    "decode_actions",
    "ABI_VERSION",
    "DEFAULT_MAX_FRAME_SIZE",
    "abi_version",
    "__version__",
]
