"""Serving opscope to coding agents (`opscope mcp`): the tools as data (`tools`), the folders a server may read
(`roots`), answers bounded in size and paged by cursor (`bounds`), one call apart from the protocol (`calls`) and
the MCP SDK's server over stdio (`mcp_server`). The commands themselves run through the CLI (cli/mcp.py)."""
