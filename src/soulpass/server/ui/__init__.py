"""The memory browser served by ``soulpass serve`` at ``/ui`` (``routes.mount_ui``)."""

from soulpass.server.ui.routes import mount_ui

__all__ = ["mount_ui"]
