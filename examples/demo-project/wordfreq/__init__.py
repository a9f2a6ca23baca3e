"""Count the most common words of a text."""

from .counter import count_words, top_words

__all__ = ["count_words", "top_words"]
