package headtail

import "testing"

// Head keeps the first Max bytes across writes and swallows the rest
// without an error.
func TestHead(t *testing.T) {
	h := &Head{Max: 5}
	for _, s := range []string{"abc", "defg", "hij"} {
		if n, err := h.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := h.String(); got != "abcde" {
		t.Errorf("kept %q, want abcde", got)
	}
}
