#!/bin/sh
# Airlock's demo agent: a deterministic stand-in for an AI coding agent, so
# the whole pipeline runs with no API key. It does what the TODO asks (stop
# words for wordfreq) and explains itself in .airlock/summary.md, as real
# agents are asked to. POSIX sh: it runs with the busybox of the minimal
# guest image.
#
#   airlock run --project examples/demo-project --script examples/demo-agent.sh
#
# It edits two files, adds one, deletes one, and makes one executable.
set -eu

echo "demo-agent: reading TODO.md"
cat TODO.md

echo "demo-agent: adding stop words to wordfreq/counter.py"
cat > wordfreq/counter.py <<'PY'
"""Word counting, with optional stop words."""

import re
from collections import Counter

WORD = re.compile(r"[A-Za-z0-9']+")


def words(text):
    """Yield the words of text, in lower case."""
    for match in WORD.finditer(text):
        yield match.group(0).lower()


# Words most texts are full of; top_words can leave them out.
STOP_WORDS = frozenset({"a", "an", "and", "in", "is", "it", "of", "the", "to"})


def count_words(text, stop_words=frozenset()):
    """Return a Counter of the words of text, leaving out stop_words."""
    return Counter(w for w in words(text) if w not in stop_words)


def top_words(text, n=10, stop_words=frozenset()):
    """Return the n most common words of text as (word, count) pairs."""
    if n < 1:
        raise ValueError("n must be at least 1")
    return count_words(text, stop_words).most_common(n)
PY

echo "demo-agent: documenting it in README.md"
cat >> README.md <<'MD'

## Stop words

`top_words(text, stop_words=STOP_WORDS)` leaves out the most common English
words ("the", "a", "and"…), so the counts show what a text is about.
MD

echo "demo-agent: adding tests/test_stopwords.py"
cat > tests/test_stopwords.py <<'PY'
import unittest

from wordfreq.counter import STOP_WORDS, top_words


class StopWordsTest(unittest.TestCase):
    def test_leaves_out_stop_words(self):
        text = "the cat and the hat and the bat"
        self.assertEqual(top_words(text, 1, STOP_WORDS), [("cat", 1)])

    def test_default_keeps_every_word(self):
        self.assertEqual(top_words("the the cat", 1), [("the", 2)])


if __name__ == "__main__":
    unittest.main()
PY

echo "demo-agent: the TODO is done, removing TODO.md"
rm TODO.md

echo "demo-agent: scripts/release.sh has a #! line but was not executable; fixing"
chmod +x scripts/release.sh

mkdir -p .airlock
cat > .airlock/summary.md <<'MD'
Added stop words to wordfreq, as TODO.md asked.

- wordfreq/counter.py: a STOP_WORDS set, and a stop_words parameter on
  count_words and top_words. It defaults to no stop words, so existing
  callers get the same counts as before.
- README.md: a "Stop words" section.
- tests/test_stopwords.py: tests for both behaviours.
- TODO.md: removed, its only item is done.
- scripts/release.sh: made executable; it starts with #!/bin/sh, like
  scripts/check.sh, which already was.
MD
echo "demo-agent: done"
