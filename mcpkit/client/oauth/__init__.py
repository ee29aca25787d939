"""OAuth 2.1 for mcpkit.client: ``connect(url, oauth=OAuth(...))``. See docs/client.md."""

from .authorizers import Authorizer, HeadlessAuthorizer, LoopbackAuthorizer
from .enterprise import IdJagExchange
from .flow import OAuth
from .grants import ClientIdentity, Tokens
from .store import FileTokenStore, MemoryTokenStore, TokenStore, default_token_file

__all__ = ["OAuth", "IdJagExchange", "Authorizer", "HeadlessAuthorizer", "LoopbackAuthorizer", "ClientIdentity", "Tokens",
           "TokenStore", "MemoryTokenStore", "FileTokenStore", "default_token_file"]
