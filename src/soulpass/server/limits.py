"""What keeps one client from taking the server (issue 16 item 2, issue 18 item 6): a request rate
per key, a limit on failed key attempts per client address, a storage quota per account.

All three live in the serving process (one token bucket per key or address; several processes
each keep their own). Refusals are JSON errors: 429 with ``Retry-After`` for the rates, 507 for
the quota. The quota is checked before a write is accepted, against the account's stored bytes
(``AccountBackend.stored_bytes``, re-measured at most every ``QUOTA_TTL`` seconds), so an account
can pass it by at most one request body.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from soulpass.errors import InvalidInput, SoulpassError

__all__ = ["QUOTA_TTL", "Guards", "KeyAttempts", "QuotaExceeded", "RateLimited", "ServerLimits", "TokenBuckets"]

QUOTA_TTL = 5.0


class RateLimited(SoulpassError):
    """Too many requests (429); ``retry_after`` says in how many seconds to try again."""

    http_status = 429

    def __init__(self, message: str, retry_after: float, **details: object) -> None:
        super().__init__(message, retry_after=math.ceil(retry_after), **details)
        self.retry_after = math.ceil(retry_after)


class QuotaExceeded(SoulpassError):
    """The account holds its quota of bytes: writes are refused until something is forgotten (507)."""

    http_status = 507


@dataclass(frozen=True)
class ServerLimits:
    """``rate``/``burst``: requests per second per key, and how many may come at once (0: no limit);
    ``failed_keys``: failed key attempts per minute per client address (0: no limit);
    ``quota_bytes``: bytes one account may store (0: no quota)."""

    rate: float = 50.0
    burst: int = 200
    failed_keys: int = 20
    quota_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        for name in ("rate", "burst", "failed_keys", "quota_bytes"):
            if getattr(self, name) < 0:
                raise InvalidInput(f"{name} must be 0 or more, not {getattr(self, name)}", field=name)


class TokenBuckets:
    """One token bucket per key: ``capacity`` tokens, refilled at ``rate`` per second."""

    def __init__(self, rate: float, capacity: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.capacity, self.clock = rate, capacity, clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._lock = threading.Lock()

    def wait(self, key: str) -> float:
        """Seconds until ``key`` has a token (0: it has one, and spent it)."""
        if self.rate <= 0 or self.capacity <= 0:
            return 0.0
        with self._lock:
            now = self.clock()
            tokens, at = self._buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - at) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            if len(self._buckets) > 100_000:  # forget full buckets: they are as good as new
                self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.capacity}
            return (1 - tokens) / self.rate

    def peek(self, key: str) -> float:
        """Seconds until ``key`` would have a token, spending nothing."""
        if self.rate <= 0 or self.capacity <= 0:
            return 0.0
        with self._lock:
            tokens, at = self._buckets.get(key, (self.capacity, self.clock()))
            tokens = min(self.capacity, tokens + (self.clock() - at) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate


class KeyAttempts:
    """The wrong-key limiter: ``per_minute`` failed key checks per client address (0: no limit),
    the same for every door a key is typed at (REST, /ui, MCP over HTTP)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = TokenBuckets(per_minute / 60.0, per_minute, clock)

    def before_key_check(self, client: str) -> None:
        """Refuse a client address that failed too many key checks lately, before checking its key."""
        wait = self.failures.peek(client)
        if wait > 0:
            raise RateLimited(f"too many failed API key attempts from this address: try again in {math.ceil(wait)} s",
                              wait)

    def key_failed(self, client: str) -> None:
        self.failures.wait(client)


class Guards:
    """The three limits of one app (``app.state.guards``)."""

    def __init__(self, limits: ServerLimits, stored_bytes: Callable[[str], int],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits, self.clock, self._stored_bytes = limits, clock, stored_bytes
        self.requests = TokenBuckets(limits.rate, limits.burst, clock)
        self.keys = KeyAttempts(limits.failed_keys, clock)
        self._sizes: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def before_key_check(self, client: str) -> None:
        self.keys.before_key_check(client)

    def key_failed(self, client: str) -> None:
        self.keys.key_failed(client)

    def request(self, key_id: str) -> None:
        wait = self.requests.wait(key_id)
        if wait > 0:
            raise RateLimited(f"this key sends more than {self.limits.rate:g} requests per second "
                              f"(bursts of {self.limits.burst}): try again in {math.ceil(wait)} s", wait)

    def write(self, account: str, incoming: int) -> None:
        """Refuse a write of ``incoming`` bytes to an account that holds its quota already."""
        quota = self.limits.quota_bytes
        if quota <= 0:
            return
        with self._lock:
            size, at = self._sizes.get(account, (0, -math.inf))
        if self.clock() - at > QUOTA_TTL:
            size = self._stored_bytes(account)
            with self._lock:
                self._sizes[account] = (size, self.clock())
        if size + incoming > quota:
            raise QuotaExceeded(f"account {account!r} stores {size} bytes, its quota is {quota}: forget or "
                                f"export what it no longer needs, or ask for a larger quota",
                                account=account, stored_bytes=size, quota_bytes=quota)
        with self._lock:  # count the write until the next measure
            self._sizes[account] = (size + incoming, self._sizes.get(account, (0, self.clock()))[1])
