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
client an ordered list that starts with a broker that answered and leaves out every broker the
refresh saw failing or silent (see ``Metadata.bootstrap_servers``).
"""

from . import _config, _options, _types, _wire, aio, blocking, errors
from ._abi import abi_version
from ._config import *
from ._options import *
from ._types import *
from ._wire import *
from .aio import *
from .blocking import *
from .errors import *
from .session import Session

try:
    from importlib.metadata import version as _version

    __version__ = _version("stagger-kafka")
except Exception:  # pragma: no cover - not installed as a distribution
    __version__ = "0.0.0"

# The package's names are its modules' (each module's ``__all__`` lists its own):
# one refresh and the long-lived clients, options, results, errors, the sans-IO layer.
__all__ = ["Session", "abi_version", "__version__"]
__all__ += aio.__all__
__all__ += blocking.__all__
__all__ += _options.__all__
__all__ += _config.__all__
__all__ += _types.__all__
__all__ += errors.__all__
__all__ += _wire.__all__
