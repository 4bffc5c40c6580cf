"""The Model Context Protocol, client side: the user's servers for agents' sessions.

``jsonrpc`` is the wire both sides speak; agentrun's own server, a face like the CLI, is
``cli/mcp_server.py``.
"""
