"""The OAuth options of ``mcpkit tools / call / discover`` and ``mcpkit logout``.

With ``--oauth`` the client answers a server's 401 by sending the user to a browser (the
redirect comes back to a listener on a loopback port) and keeps the tokens in a file readable
only by the user (``--oauth-token-file``, default ``oauth-tokens.json`` in mcpkit's data
folder), so later commands need no browser until the refresh token runs out.
"""

from __future__ import annotations

from typing import Any, Callable

import click


def oauth_options(f: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--oauth", is_flag=True, help="Authorize with OAuth when the server asks (browser sign-in, tokens cached)."),
        click.option("--oauth-client-id", metavar="ID", envvar="MCPKIT_OAUTH_CLIENT_ID",
                     help="A pre-registered client id (else the client registers itself where it may)."),
        click.option("--oauth-client-secret", metavar="SECRET", envvar="MCPKIT_OAUTH_CLIENT_SECRET",
                     help="The secret of --oauth-client-id, if it has one."),
        click.option("--oauth-scope", "oauth_scopes", multiple=True, metavar="SCOPE",
                     help="Ask for this scope (repeatable) instead of what the server suggests."),
        click.option("--oauth-port", type=int, default=0, show_default=True,
                     help="Loopback port for the browser's redirect (0 picks one; fix it if your client id is registered with one)."),
        click.option("--oauth-token-file", type=click.Path(dir_okay=False), envvar="MCPKIT_TOKEN_FILE",
                     help="Where tokens and registrations are kept [default: oauth-tokens.json in mcpkit's data folder]."),
        click.option("--oauth-client-credentials", is_flag=True,
                     help="Act as the client itself (client_credentials grant; needs --oauth-client-id and secret)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def build_oauth(oauth: bool, oauth_client_id: str | None, oauth_client_secret: str | None,
                oauth_scopes: tuple[str, ...], oauth_port: int, oauth_token_file: str | None,
                oauth_client_credentials: bool) -> Any:
    """The ``OAuth`` object the options describe, or None without ``--oauth``."""
    if not (oauth or oauth_client_credentials):
        return None
    from . import FileTokenStore, LoopbackAuthorizer, OAuth, default_token_file

    store = FileTokenStore(oauth_token_file or default_token_file())
    if oauth_client_credentials:
        if not (oauth_client_id and oauth_client_secret):
            raise click.UsageError("--oauth-client-credentials needs --oauth-client-id and --oauth-client-secret")
        return OAuth(grant="client_credentials", client_id=oauth_client_id, client_secret=oauth_client_secret,
                     scopes=oauth_scopes or None, store=store)
    return OAuth(authorizer=LoopbackAuthorizer(port=oauth_port), store=store, client_name="mcpkit CLI",
                 client_id=oauth_client_id, client_secret=oauth_client_secret, scopes=oauth_scopes or None)


@click.command("logout")
@click.argument("target", required=False, metavar="[URL]")
@click.option("--oauth-token-file", type=click.Path(dir_okay=False), envvar="MCPKIT_TOKEN_FILE",
              help="The token file [default: oauth-tokens.json in mcpkit's data folder].")
def logout_cmd(target: str | None, oauth_token_file: str | None) -> None:
    """Forget the OAuth tokens kept for URL (for every server without one)."""
    import trio

    from . import FileTokenStore, default_token_file

    store = FileTokenStore(oauth_token_file or default_token_file())
    gone = trio.run(store.forget, f"tokens {target}" if target else "")
    click.echo(f"forgot {gone} saved {'entry' if gone == 1 else 'entries'}")
