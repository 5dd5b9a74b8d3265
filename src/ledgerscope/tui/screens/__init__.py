"""The screens: ``main`` (the questions list and detail panes, with its actions, dialogs and pane
drawing split into their own modules), the integrity block, and the modal ones (help, quick
filters, export, re-run)."""
