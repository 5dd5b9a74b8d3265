"""The sentence splitter's old home: it moved to :mod:`ledgerscope.common.sentences` so the
importers (inputs layer) can declare sentence support with the very rule the reader uses."""

from ledgerscope.common.sentences import split_sentences

__all__ = ["split_sentences"]
