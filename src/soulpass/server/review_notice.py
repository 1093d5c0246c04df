"""A Redis message when an archive starts to await review (issue 41 item 6), so a person's app
can ask them at once: ``soulpass serve --review-redis URL`` publishes, on the channel
``soulpass:reviews``, ``{"account", "sandbox_id", "version", "items": [{"id", "kind", "action",
"text", "review"}]}`` for each archive the review policy holds (an archive asked again publishes
again). Publishing is best effort: the archive's answer (202) never depends on Redis."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from soulpass.consolidation.outcomes import AwaitingReview
from soulpass.errors import BackendUnavailable

__all__ = ["CHANNEL", "RedisReviewNotice", "ReviewNotice"]

CHANNEL = "soulpass:reviews"
ReviewNotice = Callable[[str, AwaitingReview], None]  # (account, the held archive)
log = logging.getLogger(__name__)


class RedisReviewNotice:
    """Publishes each held archive on a Redis channel."""

    def __init__(self, client: Any, channel: str = CHANNEL, errors: tuple[type[Exception], ...] = (OSError,)) -> None:
        self.client, self.channel, self._errors = client, channel, errors

    @classmethod
    def from_url(cls, url: str, channel: str = CHANNEL) -> RedisReviewNotice:
        try:
            import redis
        except ImportError as exc:
            raise BackendUnavailable("review messages need the redis package: pip install 'soulpass[redis]'",
                                     extra="redis") from exc
        return cls(redis.Redis.from_url(url, socket_timeout=2), channel, (redis.RedisError, OSError))

    def __call__(self, account: str, waiting: AwaitingReview) -> None:
        message = {"account": account, "sandbox_id": waiting.sandbox_id, "version": waiting.version,
                   "items": [i.model_dump(mode="json", include={"id", "kind", "action", "text", "review"})
                             for i in waiting.items]}
        try:
            self.client.publish(self.channel, json.dumps(message, ensure_ascii=False))
        except self._errors as exc:
            log.warning("could not publish that sandbox %s awaits review: %s", waiting.sandbox_id, exc)
