"""The Model Context Protocol: agentrun's verbs as an MCP server, the user's servers for agents."""
