"""The browser console at ``/console`` (``serve --console``; docs/console.md): the plugins and
their problems, every tool, resource and prompt, live sessions, calls and tasks, latency per
tool, and a try-it form per tool. Made only when enabled: off, nothing of it is imported and
the app has no observer for it."""

from .access import check_console_settings
from .pages import PATH, Console
from .share import shared_folder

__all__ = ["Console", "PATH", "check_console_settings", "shared_folder"]
