"""ollm_pool: several model servers behind one provider, for ollm.

``PoolProvider([...])`` takes other providers' instances (an ``OllamaProvider`` per
host, an ``OpenAIProvider`` for a vLLM server) and sends each request to one of them:
where the model is loaded, then where a slot is free, then where the conversation went
before; a member that cannot be reached rests behind its circuit breaker; one retry
budget per request; failover only before the reply starts, never joining two servers'
words. Installing the package registers the ``pool`` provider: ``-p pool:NAME`` builds
the pool ``NAME`` of ``pools.toml`` through the provider registry. Names load on first
use, so discovering the plugin imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ollm.kit import lazy_exports
from ollm_pool._version import __version__

if TYPE_CHECKING:
    from ollm_pool._breaker import CircuitBreaker, CircuitState, Clock, SystemClock
    from ollm_pool._config import PoolSettings, build_pool, load_pools, pools_path
    from ollm_pool._member import Member, MemberStatus
    from ollm_pool._provider import PoolProvider

_LAZY: dict[str, str] = {
    "CircuitBreaker": "ollm_pool._breaker",
    "CircuitState": "ollm_pool._breaker",
    "Clock": "ollm_pool._breaker",
    "Member": "ollm_pool._member",
    "MemberStatus": "ollm_pool._member",
    "PoolProvider": "ollm_pool._provider",
    "PoolSettings": "ollm_pool._config",
    "SystemClock": "ollm_pool._breaker",
    "build_pool": "ollm_pool._config",
    "load_pools": "ollm_pool._config",
    "pools_path": "ollm_pool._config",
}

__all__ = [
    "CircuitBreaker",
    "CircuitState",
    "Clock",
    "Member",
    "MemberStatus",
    "PoolProvider",
    "PoolSettings",
    "SystemClock",
    "__version__",
    "build_pool",
    "load_pools",
    "pools_path",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
