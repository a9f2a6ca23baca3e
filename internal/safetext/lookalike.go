package safetext

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// lookalikes are, per script, the letters that pass for Latin ones in
// common fonts (after Unicode's confusables list). A word is a lookalike
// when it holds ASCII letters and some of these and no other letter:
// Greek in physics code (Δt, λ), words wholly in another alphabet
// (Привет) and accented Latin (café) are not.
var lookalikes = []struct {
	script  string
	letters string
}{
	{"Cyrillic", "АВЕКМНОРСТУХЅІЈҮҺԚԜӀаеорсухѕіјԁԛԝүһӏ"},
	{"Greek", "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοιρνκυϲϳ"},
	{"Armenian", "օսհոզ"},
	{"Cherokee", "ᎪᏴᏟᎬᏀᎻᎫᏦᏞᎷᏢᏚᎢᏙᏔᏃ"},
}

// Lookalike is a word that reads as another: ASCII letters mixed with
// letters of another script that pass for Latin ones ("cоunt_words" with a
// Cyrillic о), the homoglyph half of a Trojan Source attack.
type Lookalike struct {
	// Word is the word as written; Shown is it with every character
	// outside ASCII as <U+XXXX> ("c<U+043E>unt_words").
	Word, Shown string
	// Scripts are the scripts it mixes: Latin, then the others.
	Scripts []string
}

// String says the word and its scripts: "c<U+043E>unt_words (Latin,
// Cyrillic)".
func (l Lookalike) String() string { return l.Shown + " (" + strings.Join(l.Scripts, ", ") + ")" }

// Lookalikes returns the lookalike words of s: runs of letters, digits,
// _ and $, less those run into by a backslash escape (\x12μ in a string
// literal is bytes, not a name).
func Lookalikes(s string) []Lookalike {
	if isASCII(s) {
		return nil
	}
	var out []Lookalike
	forWordsAt(s, func(w string, _ int, escaped bool) {
		if escaped {
			return
		}
		if scripts := mixes(w); scripts != nil {
			out = append(out, Lookalike{Word: w, Shown: showCodes(w), Scripts: scripts})
		}
	})
	return out
}

// Name returns a name from the guest (a declaration, a path) safe to show
// within one line, as Line does, and with each lookalike word spelt with
// its characters outside ASCII as <U+XXXX>, so that "cоunt_words" is not
// read as count_words.
func Name(s string) string { return Line(showLookalikes(s)) }

// showLookalikes returns s with each lookalike word spelt with
// <U+XXXX>, and the rest as it is.
func showLookalikes(s string) string {
	if isASCII(s) {
		return s
	}
	var b strings.Builder
	last := 0
	forWordsAt(s, func(w string, at int, escaped bool) {
		if escaped || mixes(w) == nil {
			return
		}
		b.WriteString(s[last:at])
		b.WriteString(showCodes(w))
		last = at + len(w)
	})
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '$'
}

// forWordsAt calls fn with each word of s, its byte offset, and whether a
// backslash comes right before it.
func forWordsAt(s string, fn func(w string, at int, escaped bool)) {
	at := 0
	for at < len(s) {
		i := strings.IndexFunc(s[at:], isWordRune)
		if i < 0 {
			return
		}
		start := at + i
		j := strings.IndexFunc(s[start:], func(r rune) bool { return !isWordRune(r) })
		end := len(s)
		if j >= 0 {
			end = start + j
		}
		fn(s[start:end], start, start > 0 && s[start-1] == '\\')
		at = end
	}
}

// mixes returns the scripts a lookalike word mixes, nil for any other.
func mixes(w string) []string {
	latin := false
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
		if !found {
			return nil // a letter of its own: text, not a spoofed name
		}
	}
	if !latin || len(scripts) == 0 {
		return nil
	}
	return append([]string{"Latin"}, scripts...)
}

// showCodes writes w with its characters outside ASCII as <U+XXXX>, cut
// after 120 characters.
func showCodes(w string) string {
	var b strings.Builder
	n := 0
	for _, r := range w {
		if n++; n > 120 {
			b.WriteString("…")
			break
		}
		if r < 0x80 {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "<U+%04X>", r)
		}
	}
	return b.String()
}
