"""The interactive API docs at ``/docs``, from packaged assets: Swagger UI 5's files come with the
``swagger-ui-bundle-v2`` package (module ``swagger_ui_bundle``, extra ``server``) and are served by
this app, so the page works offline and loads nothing from a CDN. Swagger UI 5 reads the OpenAPI
3.1 schema FastAPI writes (the 3.20 of ``swagger-ui-bundle`` 1.x could not render it). The schema
stays at ``/openapi.json``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS", "add_docs", "swagger_assets"]

ASSETS = "/docs/assets"


def swagger_assets() -> Path | None:
    """Swagger UI's folder in the ``swagger_ui_bundle`` package, or None when it is not installed."""
    if importlib.util.find_spec("swagger_ui_bundle") is None:
        return None
    import swagger_ui_bundle  # type: ignore[import-untyped]

    return Path(swagger_ui_bundle.swagger_ui_path)


def add_docs(app: FastAPI) -> None:
    """``GET /docs`` (Swagger UI over ``/openapi.json``) and its assets; nothing when the package is absent."""
    folder = swagger_assets()
    if folder is None:
        return
    app.mount(ASSETS, StaticFiles(directory=folder), name="docs-assets")

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API",
                                   swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{ASSETS}/swagger-ui.css",
                                   swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")
