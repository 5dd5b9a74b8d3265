"""``ledgerscope cache info|prune``: the persistent embedding cache (see pipeline/embedding_cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

cache_app = typer.Typer(help="The persistent embedding cache shared by every sweep.", no_args_is_help=True)
_DIR_HELP = "Cache directory (default: LEDGERSCOPE_EMBEDDING_CACHE, else ~/.cache/ledgerscope/embeddings)."


def _root(path: Path | None) -> Path:
    from ledgerscope.pipeline.embedding.cache import ENV_DIR, cache_root

    root = path or cache_root()
    if root is None:
        typer.echo(f"the embedding cache is off ({ENV_DIR}=off)")
        raise typer.Exit(0)
    return root


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@cache_app.command("info")
def info_cmd(
    path: Annotated[Path | None, typer.Option("--dir", help=_DIR_HELP)] = None,
) -> None:
    """Where the cache is, its size limit, and per model identity its entries and bytes."""
    from ledgerscope.pipeline.embedding.cache import info, max_bytes

    root = _root(path)
    rows = info(root)
    total = sum(r["bytes"] for r in rows)
    typer.echo(
        f"embedding cache {root}: {sum(r['entries'] for r in rows)} entries, {_size(total)} "
        f"(limit {_size(max_bytes())}, least recently used evicted first)"
    )
    for r in rows:
        typer.echo(
            f"  {r['model_id'][:16]}  {r['model']} ({r['device']}): {r['entries']} entries, "
            f"{_size(r['bytes'])}"
        )


@cache_app.command("prune")
def prune_cmd(
    path: Annotated[Path | None, typer.Option("--dir", help=_DIR_HELP)] = None,
    max_size: Annotated[
        str | None,
        typer.Option(
            "--max-size",
            help="Keep at most this much (500M, 8G); default the configured limit; 0 empties it.",
        ),
    ] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Also read every entry; delete bad ones.")] = False,
) -> None:
    """Delete least recently used entries down to the size limit (and, with --verify, bad ones)."""
    from ledgerscope.pipeline.embedding.cache import max_bytes, parse_size, prune

    root = _root(path)
    try:
        limit = parse_size(max_size) if max_size is not None else max_bytes()
    except ValueError:
        raise typer.BadParameter(f"--max-size {max_size!r}: a size such as 500M or 8G") from None
    done = prune(root, limit, verify=verify)
    typer.echo(
        f"embedding cache {root}: {done['evicted']} evicted, {done['invalid']} invalid removed, "
        f"{done['stale']} stale temporary files removed, {_size(done['freed'])} freed; "
        f"{done['kept']} entries, {_size(done['bytes'])} kept"
    )
