package review

import (
	"path"
	"strings"

	"github.com/airlock-dev/airlock/internal/safetext"
)

// FlagConfusable: the path, or added lines, hold a name that mixes ASCII
// letters with letters of another script that pass for Latin ones
// (safetext.Lookalikes): "cоunt_words" with a Cyrillic о reads as
// count_words but is another name, the homoglyph half of a Trojan Source
// attack. The reason names it with the foreign letters as <U+XXXX>.
const FlagConfusable FlagKind = "confusable"

// maxConfusableNames is how many names one reason quotes.
const maxConfusableNames = 3

// confusableFlag flags f when its path, or an added line, holds a
// lookalike word. Binary content is not scanned, nor the lines of prose
// files (translations, documentation), where a word may mix alphabets.
func confusableFlag(f *File) (Flag, bool) {
	var reasons []string
	for _, p := range []string{f.Path, f.OldPath} {
		if ls := safetext.Lookalikes(p); len(ls) > 0 {
			reasons = append(reasons, "path mixing lookalike scripts: "+ls[0].String())
			break
		}
	}
	var names []string
	var lines []int
	seen := map[string]bool{}
	if !f.Binary && !confusableExempt(f.Path) {
		addedLines(f, func(l string, n int) {
			ls := safetext.Lookalikes(l)
			for _, w := range ls {
				if !seen[w.Word] && len(names) < maxConfusableNames {
					names = append(names, w.String())
				}
				seen[w.Word] = true
			}
			if len(ls) > 0 {
				lines = append(lines, n)
			}
		})
	}
	if len(lines) > 0 {
		r := "name mixing lookalike scripts: " + strings.Join(names, ", ")
		if len(seen) > len(names) {
			r += ", …"
		}
		reasons = append(reasons, r+atLines(lines))
	}
	if len(reasons) == 0 {
		return Flag{}, false
	}
	return Flag{Kind: FlagConfusable, Reason: strings.Join(reasons, "; "), Lines: lines}, true
}

// confusableExempt are files whose words are not names: translations and
// prose, where a word may well mix alphabets.
func confusableExempt(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".po", ".pot", ".md", ".txt", ".rst", ".adoc", ".html", ".htm", ".xliff", ".xlf", ".strings", ".resx", ".properties":
		return true
	}
	return false
}
