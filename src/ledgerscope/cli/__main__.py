"""``python -m ledgerscope.cli``: the same app as the ``ledgerscope`` console script."""

from ledgerscope.cli.main import main

main()
