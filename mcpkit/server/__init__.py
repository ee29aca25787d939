"""The server: registry built from plugins, request dispatch, per-request context."""
