"""Soulpass behind the memory interfaces of agent frameworks, each an extra of its own.

- ``soulpass.integrations.langgraph``: ``SoulpassStore``, a LangGraph ``BaseStore`` (extra ``langgraph``).
- ``soulpass.integrations.openai_agents``: ``SoulpassSession``, an OpenAI Agents SDK ``Session``, and
  ``memory_search_tool`` (extra ``openai-agents``).
- ``soulpass.integrations.pydantic_ai``: ``SoulpassHistory``, a Pydantic AI message history, and
  ``memory_search_tool`` (extra ``pydantic-ai``).

They are built on the public library API only (``soulpass.open``, ``Account``, ``Sandbox``,
``Account.search``); importing one without its framework says which extra to install.
"""
