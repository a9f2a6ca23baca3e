package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestUnquoteWords: every command line the agent reads as words (to run
// a builtin instead of the shell) is read exactly as /bin/sh reads it,
// and what it cannot be sure of is left to the shell.
func TestUnquoteWords(t *testing.T) {
	sq := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	lines := []string{
		"'/init' 'manifest' '--' '/workspace'",
		"/run/airlock-guest/init manifest --overlay-lower /run/airlock-guest/lower --max-entries 500000 -- /workspace",
		sq("/init") + " " + sq("it's") + " " + sq("") + " " + sq("a b") + " " + sq("$HOME") + " " + sq("`id`") + " " + sq("\n") + " " + sq("'''"),
		"/init a=b c@d e%f g+h i,j k:l",
		// Left to the shell: each of these is something else to it.
		"/init manifest $HOME", "/init 'a'b", "/init a'b'", "/init  two-spaces", "/init trailing ", " /init leading",
		"/init a;b", "/init a|b", "/init *", "/init ~", "/init a\tb", "/init a\nb", "/init 'unterminated", "/init 'a''b'",
		"/init \"dq\"", "/init a\\ b", "/init $(id)", "/init {a,b}", "/init a#b", "/init #c", "", "'",
	}
	for _, line := range lines {
		words, ok := unquoteWords(line)
		if !ok {
			continue
		}
		// What sh makes of the same line, with printf standing in for
		// the command (its first word replaced).
		rest := strings.TrimPrefix(line, strings.SplitN(line, " ", 2)[0])
		out, err := exec.Command("/bin/sh", "-c", "printf '<%s>' "+sq(words[0])+rest).Output()
		if err != nil {
			t.Errorf("sh -c on %q: %v", line, err)
			continue
		}
		var want string
		for _, w := range words {
			want += "<" + w + ">"
		}
		if string(out) != want {
			t.Errorf("%q read as %q; sh reads %s", line, words, out)
		}
	}
	for _, line := range lines[4:] {
		if words, ok := unquoteWords(line); ok {
			t.Errorf("%q read as %q, want it left to the shell", line, words)
		}
	}
}
