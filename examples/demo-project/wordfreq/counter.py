"""Word counting."""

import re
from collections import Counter

WORD = re.compile(r"[A-Za-z0-9']+")


def words(text):
    """Yield the words of text, in lower case."""
    for match in WORD.finditer(text):
        yield match.group(0).lower()


def count_words(text):
    """Return a Counter of the words of text."""
    return Counter(words(text))


def top_words(text, n=10):
    """Return the n most common words of text as (word, count) pairs."""
    if n < 1:
        raise ValueError("n must be at least 1")
    return count_words(text).most_common(n)
