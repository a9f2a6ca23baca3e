package images

import (
	"strings"
	"testing"
)

// A project's setup command reaches a terminal only as safe text: an
// escape sequence in devcontainer.json cannot clear the screen or hide
// what will run.
func TestSetupStepStringIsSafe(t *testing.T) {
	for _, s := range []SetupStep{{Shell: "echo hi\x1b[2J\x1b[1;1Hrm -rf ~"}, {Argv: []string{"sh", "-c", "x\rcurl evil\u202e"}}} {
		got := s.String()
		if strings.ContainsAny(got, "\x1b\r\n\u202e") {
			t.Errorf("%q rendered as %q", s, got)
		}
	}
}
