package review

import (
	"testing"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// TestFlagConfusable is the homoglyph attack: a name written with a
// Cyrillic, Greek or Armenian letter that looks Latin reads as another
// name. Words wholly in another alphabet, Greek letters used as symbols
// (Δt), removed lines and prose files are not flagged.
func TestFlagConfusable(t *testing.T) {
	checkFlags(t, []flagCase{
		{name: "cyrillic o in a function name", path: "wordfreq/counter.py", old: "def count_words(text):\n    pass\n",
			new:   "def count_words(text):\n    pass\n\ndef c\u043eunt_words(text):\n    return 0\n",
			kinds: []FlagKind{FlagConfusable},
			reasons: map[FlagKind][]string{FlagConfusable: {
				"name mixing lookalike scripts: c<U+043E>unt_words (Latin, Cyrillic) at line 4"}}},
		{name: "greek omicron and armenian o", path: "a.go", old: absent,
			new:   "package a\n\nvar pr\u03bfxy = 1\nvar f\u0585o = pr\u03bfxy\n",
			kinds: []FlagKind{FlagConfusable},
			reasons: map[FlagKind][]string{FlagConfusable: {
				"pr<U+03BF>xy (Latin, Greek), f<U+0585>o (Latin, Armenian) at lines 3, 4"}}},
		{name: "a word wholly in another alphabet", path: "i18n.js", old: absent, new: "const greeting = \"\u041f\u0440\u0438\u0432\u0435\u0442\";\n"},
		{name: "greek as a symbol", path: "physics.py", old: absent, new: "\u0394t = 0.1\n\u03bb_max = 2 * \u03c0\n"},
		{name: "removed, not added", path: "a.py", old: "c\u043eunt = 1\n", new: "count = 1\n"},
		{name: "prose", path: "docs/ru.md", old: absent, new: "Word \u0441ount\n"},
		{name: "a path", path: "wordfreq/c\u043eunter.py", old: absent, new: "x = 1\n", kinds: []FlagKind{FlagConfusable},
			reasons: map[FlagKind][]string{FlagConfusable: {"path mixing lookalike scripts: c<U+043E>unter (Latin, Cyrillic)"}}},
		{name: "accents are Latin", path: "a.py", old: absent, new: "caf\u00e9_count = na\u00efve + 1\n"},
	})
}

// TestConfusableOnGoTree: on the Go toolchain's sources, which test
// Unicode at length, the lines that mix lookalike alphabets in a word are
// few, and each is a real mix (a homoglyph test or a spoofing example).
func TestConfusableOnGoTree(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the Go tree")
	}
	lines := 0
	flagged := map[string]int{}
	files := goTreeLines(t, func(rel, line string) {
		if confusableExempt(rel) {
			return
		}
		if words := safetext.Lookalikes(line); len(words) > 0 {
			if flagged[rel] == 0 {
				t.Logf("%s: %s", rel, words[0])
			}
			flagged[rel]++
			lines++
		}
	})
	t.Logf("%d of %d files flagged (%d lines)", len(flagged), files, lines)
	if files < 1000 {
		t.Fatalf("read %d files: not the Go tree", files)
	}
	if len(flagged) > files/1000 {
		t.Errorf("%d of %d files flagged: too many for a second look", len(flagged), files)
	}
}
