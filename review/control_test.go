package review

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFlagControl is the attack: a change whose content, name or link
// target would rewrite or reorder what a reviewer sees carries
// FlagControl; ordinary changes, CRLF line ends, tabs and non-ASCII text
// do not.
func TestFlagControl(t *testing.T) {
	oldT := tree{files: map[string]string{
		"setup.py":         "print('hello')\n",
		"crlf.txt":         "one\r\ntwo\r\n",
		"untouched.txt":    "a\x1b[31mred\x1b[m\nb\nc\nd\ne\nf\ng\nh\ni\nj\n",
		"tc":               "x\n",
		"bidi.go":          "package p\n",
		"plain.txt":        "héllo\twörld\n",
		"moved.txt":        "content\n",
		"link":             "->target",
		"evil\u202etxt.sh": "x\n",
	}}
	newT := tree{files: map[string]string{
		"setup.py":         "print('hello')\r\x1b[2Kimport os; os.system('id')\nprint('bye')\n",
		"crlf.txt":         "one\r\n2\r\n",
		"untouched.txt":    "a\x1b[31mred\x1b[m\nb\nc\nd\ne\nf\ng\nh\ni\nJ\n",
		"tc":               "->\x1b]0;title\x07",
		"bidi.go":          "package p\n// \u202e } \u2066 if admin {\n",
		"plain.txt":        "héllo\twörld!\n",
		"zw\u200bname.txt": "fine\n",
		"link":             "->tar\u200bget",
		"evil\u202etxt.sh": "y\n",
		"new\x1b[2K.txt":   "fine\n",
		"renamed.txt":      "content\n",
	}}
	fx := newFixture(t, oldT, newT, map[string]string{"moved.txt": "renamed.txt"})
	got := map[string]bool{}
	for _, f := range fx.cs.Files {
		got[f.Path] = f.HasFlag(FlagControl)
		for _, fl := range f.Flags {
			if fl.Kind == FlagControl && fl.Reason != ControlReason {
				t.Errorf("%q: reason %q, want %q", f.Path, fl.Reason, ControlReason)
			}
		}
	}
	want := map[string]bool{
		"setup.py":         true,  // a line that erases itself
		"crlf.txt":         false, // CRLF line ends are text
		"untouched.txt":    false, // its colour codes are outside the hunk
		"tc":               true,  // a type change to a link with an OSC target
		"bidi.go":          true,  // trojan source
		"plain.txt":        false,
		"zw\u200bname.txt": true, // an invisible character in the name
		"link":             true, // ... in a link target
		"evil\u202etxt.sh": true, // a bidi override in the name
		"new\x1b[2K.txt":   true, // an escape sequence in the name
		"renamed.txt":      false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FlagControl per file (-want +got):\n%s", diff)
	}

	// A rename whose source name is hostile is flagged too.
	fx = newFixture(t, tree{files: map[string]string{"a\u202e.txt": "same\n"}}, tree{files: map[string]string{"b.txt": "same\n"}}, map[string]string{"a\u202e.txt": "b.txt"})
	if f := fx.cs.File("b.txt"); !f.HasFlag(FlagControl) {
		t.Errorf("rename from a bidi name: flags %v, want FlagControl", f.Flags)
	}
}
