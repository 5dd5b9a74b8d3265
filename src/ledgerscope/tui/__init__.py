"""The terminal UI (``ledgerscope open``): renders and dispatches only.

``data``, ``details`` and ``model`` hold the data access and the plain data,
``render``, ``render_source`` and ``render_summary`` the text building (no
Textual in any of them); ``app``, ``loading``, ``panes`` and the
``screens``/``widgets`` packages are the Textual side. Nothing here is
imported by the headless commands.
"""
