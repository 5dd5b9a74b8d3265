"""What every command shares: options, output (JSON, tables, errors), progress, conditions of the
machine (exit 74), the extras a command needs, and the vocabulary the help texts use."""
