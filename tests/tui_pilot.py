"""Pilot helpers the TUI tests share: waiting until the app has nothing left to do."""

from __future__ import annotations


async def settle(pilot, rounds: int = 8) -> None:
    """Let workers finish and their messages (which may start more workers) be handled."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        if not any(w.is_running for w in app.workers) and not app.main.detail_loading:
            break
        await app.workers.wait_for_complete()
    await pilot.pause()
