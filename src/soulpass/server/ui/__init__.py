"""The memory browser served by ``soulpass serve`` at ``/ui``: the pages of ``routes`` and the
Sandboxes and review pages of ``review_routes``."""

from typing import Any

from soulpass.server.ui import review_routes, routes

__all__ = ["mount_ui"]


def mount_ui(app: Any) -> None:
    """Serve the browser at ``/ui`` (its assets at ``/ui/static``, no CDN)."""
    routes.mount_ui(app)
    app.include_router(review_routes.router)
