package safetext

import (
	"slices"
	"testing"
)

func TestLookalikes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // each Lookalike's String
		show string   // Name(in)
	}{
		{"def c\u043eunt_words(text):", []string{"c<U+043E>unt_words (Latin, Cyrillic)"}, "def c<U+043E>unt_words(text):"},
		{"pr\u03bfxy = f\u0585o + \u0441\u0430t", []string{"pr<U+03BF>xy (Latin, Greek)", "f<U+0585>o (Latin, Armenian)", "<U+0441><U+0430>t (Latin, Cyrillic)"},
			"pr<U+03BF>xy = f<U+0585>o + <U+0441><U+0430>t"},
		{"greeting = \"\u041f\u0440\u0438\u0432\u0435\u0442\"", nil, "greeting = \"\u041f\u0440\u0438\u0432\u0435\u0442\""},
		{"\u0394t = 2 * \u03c0", nil, "\u0394t = 2 * \u03c0"},
		{"caf\u00e9 = na\u00efve", nil, "caf\u00e9 = na\u00efve"},
		{"s := \"\\x12\u03bc\u039c\u039c\\x02\u043e\"", nil, "s := \"\\x12\u03bc\u039c\u039c\\x02\u043e\""},
		{"plain ascii", nil, "plain ascii"},
		{"Counter.\u0430dd", []string{"<U+0430>dd (Latin, Cyrillic)"}, "Counter.<U+0430>dd"},
	} {
		var got []string
		for _, l := range Lookalikes(tc.in) {
			got = append(got, l.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("Lookalikes(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if show := Name(tc.in); show != tc.show {
			t.Errorf("Name(%q) = %q, want %q", tc.in, show, tc.show)
		}
	}
}
