"""``contextledger encryption``: a new key, key rotation, and what each key still seals.

The keys come from ``CONTEXTLEDGER_ENCRYPTION_KEYS`` (``id:base64key,...``, the current
key first): the commands never take a key on the command line, where it would stay in a
shell history and a process listing.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Annotated

import typer

from contextledger.cli.errors import ExitCode
from contextledger.cli.options import ENV_KEYS, JsonOption, ProgressOption, SessionsOption, UrlOption, open_ledger
from contextledger.cli.output import progress_bar
from contextledger.cli.render import dump_json
from contextledger.errors import ConfigurationError

__all__ = ["new_key", "rotate", "status"]


def _require_keys() -> None:
    import os

    if not os.environ.get(ENV_KEYS, "").strip():
        raise ConfigurationError(f"set {ENV_KEYS}=id:base64key[,old-id:base64key...] (the current key first)")


KeyIdArg = Annotated[str, typer.Argument(help="The id to give the key (1-40 letters, digits, _ or -).")]


def new_key(key_id: KeyIdArg) -> None:
    """Print a new random 256-bit key as id:base64key, to put first in CONTEXTLEDGER_ENCRYPTION_KEYS."""
    from contextledger.encryption import Keyring, new_key

    key = new_key()
    Keyring([(key_id, key)])  # checks the id
    typer.echo(f"{key_id}:{key}")


def rotate(
    url: UrlOption = None,
    session: SessionsOption = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Values re-sealed per atomic step.")] = 200,
    progress: ProgressOption = None,
) -> None:
    """Re-seal every value under the current key (the first of CONTEXTLEDGER_ENCRYPTION_KEYS), in batches (writes).

    Resumable: run it again after an interruption; values already under the current key
    are not touched. When it reports nothing left, the old keys can be removed.
    """
    from contextledger.history.rotation import rotate as run
    from contextledger.history.transfer import list_sessions

    _require_keys()
    with open_ledger(url, read_only=False) as ledger:
        ids = list(session) if session else list_sessions(ledger.store)
        show = progress if progress is not None else sys.stderr.isatty()
        if show:
            total = sum(len(ledger.agents(s)) for s in ids)
            with progress_bar("rotate", "re-sealing", "conversations", total) as advance:
                done = run(ledger.store, batch_size=batch_size, session_ids=ids, on_conversation=lambda *_: advance(1))
        else:
            done = run(ledger.store, batch_size=batch_size, session_ids=ids)
        typer.echo(
            f"re-sealed {done.resealed} values of {done.conversations} conversations under key {done.key_id}"
            + (f"; {done.skipped} changed meanwhile (already under it)" if done.skipped else "")
        )


def status(url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Count the sealed values by key id (and those not sealed), to know when a rotation is done (read only)."""
    from contextledger.history.rotation import key_census
    from contextledger.history.transfer import list_sessions

    _require_keys()
    with open_ledger(url) as ledger:
        counts: Counter[str] = Counter()
        for sid in list_sessions(ledger.store):
            counts.update(key_census(ledger.store, sid))
        if as_json:
            dump_json(dict(sorted(counts.items())))
            return
        if not counts:
            typer.echo("no value stored")
            raise typer.Exit(ExitCode.OK)
        for key_id, count in sorted(counts.items()):
            typer.echo(f"{key_id}: {count}")
