"""Plugin system: hook specifications, entry-point discovery, per-plugin configuration."""
