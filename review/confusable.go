package review

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"
)

// FlagConfusable: added lines hold a name that mixes the letters of
// scripts that look alike (Latin with Cyrillic, Greek, Armenian or
// Cherokee): "cоunt_words" with a Cyrillic о reads as count_words but is
// another name, the homoglyph half of a Trojan Source attack. The reason
// names it with the foreign letters as <U+XXXX>.
const FlagConfusable FlagKind = "confusable"

// lookalikes are, per script, the letters that pass for Latin ones in
// common fonts (after Unicode's confusables list): a word is flagged when
// it holds Latin letters and one of these, so that Greek in physics code
// (Δt, λ) and words wholly in another alphabet (Привет) are not.
var lookalikes = []struct {
	script  string
	letters string
}{
	{"Cyrillic", "АВЕКМНОРСТУХЅІЈҮҺԚԜӀаеорсухѕіјԁԛԝүһӏ"},
	{"Greek", "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοιρνκυϲϳ"},
	{"Armenian", "օսհոզ"},
	{"Cherokee", "ᎪᏴᏟᎬᏀᎻᎫᏦᏞᎷᏢᏚᎢᏙᏔᏃ"},
}

// maxConfusableNames is how many names one reason quotes.
const maxConfusableNames = 3

// confusableFlag flags f when an added line holds a word that mixes
// lookalike scripts. Binary content is not scanned.
func confusableFlag(f *File) (Flag, bool) {
	if f.Binary || len(f.Hunks) == 0 {
		return Flag{}, false
	}
	var names []string
	var lines []int
	seen := map[string]bool{}
	addedLines(f, func(l string, n int) {
		found := false
		for _, w := range mixedScriptWords(l) {
			found = true
			if !seen[w] && len(names) < maxConfusableNames {
				seen[w] = true
				names = append(names, w)
			}
		}
		if found {
			lines = append(lines, n)
		}
	})
	if len(lines) == 0 {
		return Flag{}, false
	}
	reason := "name mixing lookalike scripts: " + strings.Join(names, ", ")
	if len(seen) > len(names) || len(lines) > len(names) {
		reason += ", …"
	}
	return Flag{Kind: FlagConfusable, Reason: reason + atLines(lines), Lines: lines}, true
}

// mixedScriptWords returns the words of line (runs of letters, digits and
// _ $, not run into by an escape) made of ASCII letters and lookalike
// letters of another script, and no other letter, each shown
// with its letters outside ASCII as <U+XXXX> and the scripts it mixes:
// `c<U+043E>unt_words (Latin, Cyrillic)`.
func mixedScriptWords(line string) []string {
	var out []string
	word := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '$' }
	ascii := true
	for _, r := range line {
		if r >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return nil
	}
	rest := line
	for rest != "" {
		// The next word, and whether an escape (\x12, \u00b5) runs into it.
		i := strings.IndexFunc(rest, word)
		if i < 0 {
			break
		}
		escaped := i > 0 && rest[i-1] == '\\'
		rest = rest[i:]
		j := strings.IndexFunc(rest, func(r rune) bool { return !word(r) })
		if j < 0 {
			j = len(rest)
		}
		w := rest[:j]
		rest = rest[j:]
		if escaped {
			continue // bytes in a string literal, not a name
		}
		latin, other := false, false
		var scripts []string
		for _, r := range w {
			if r < 0x80 {
				latin = latin || unicode.IsLetter(r)
				continue
			}
			if !unicode.IsLetter(r) {
				continue
			}
			found := false
			for _, l := range lookalikes {
				if strings.ContainsRune(l.letters, r) {
					found = true
					if !slices.Contains(scripts, l.script) {
						scripts = append(scripts, l.script)
					}
				}
			}
			other = other || !found
		}
		// A spoofed name is ASCII but for its lookalikes: a word with
		// other letters besides (μ, ά, ɑ) is text of its own.
		if !latin || len(scripts) == 0 || other {
			continue
		}
		scripts = append([]string{"Latin"}, scripts...)
		var shown strings.Builder
		for i, r := range w {
			if i >= 120 {
				shown.WriteString("…")
				break
			}
			if r < 0x80 {
				shown.WriteRune(r)
			} else {
				fmt.Fprintf(&shown, "<U+%04X>", r)
			}
		}
		out = append(out, shown.String()+" ("+strings.Join(scripts, ", ")+")")
	}
	return out
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
