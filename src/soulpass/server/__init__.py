"""The REST server (``soulpass serve``, extra ``server``) and the API keys it checks.

Import ``soulpass.server.app`` for the FastAPI app; this package itself imports nothing heavy,
so the CLI and the MCP server can use the key store without FastAPI.
"""
