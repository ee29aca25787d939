"""Transports move bytes and call the protocol core; nothing protocol-specific lives here."""
