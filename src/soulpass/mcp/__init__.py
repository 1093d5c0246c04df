"""The MCP server (``soulpass mcp``, extra ``server``): memory tools over stdio or streamable HTTP.

``soulpass.mcp.server`` needs the ``mcp`` SDK; ``soulpass.mcp.tools`` is what the tools do.
"""
