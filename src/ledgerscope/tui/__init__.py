"""The terminal UI (``ledgerscope open``): renders and dispatches only.

``data`` and ``render`` hold the data access and the text building (no
Textual); ``app`` and the ``screens``/``widgets`` packages are the Textual
side. Nothing here is imported by the headless commands.
"""
