package gui

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// TestReviewHeadsWithVerify: the review says first whether the tests
// passed in the sandbox, failed or never ran, and its output is one
// click away.
func TestReviewHeadsWithVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		verify *sandbox.VerifyResult
		want   string
		button bool
	}{
		{"none", nil, "No verify ran in the sandbox", false},
		{"failed", &sandbox.VerifyResult{Command: "go test ./...", ExitCode: 1}, "Verify FAILED (exit 1) in the sandbox: go test ./...", true},
		{"passed", &sandbox.VerifyResult{Command: "go test ./...", Passed: true}, "Tests passed in the sandbox (go test ./...)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := reviewService(t)
			svc.verifyLog = "--- FAIL: TestCount\x1b[31m red\n"
			info := svc.infos[0]
			info.Verify = tc.verify
			test.NewTempApp(t)
			r, err := NewReviewWindow(fyne.CurrentApp(), svc, info)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(r.Window.Close)
			if got := allText(r.Window.Content()); !strings.Contains(got, tc.want) {
				t.Fatalf("the review does not say %q:\n%s", tc.want, got)
			}
			if !tc.button {
				return
			}
			before := len(fyne.CurrentApp().Driver().AllWindows())
			test.Tap(findButton(t, r.Window, "Show its output"))
			wins := fyne.CurrentApp().Driver().AllWindows()
			if len(wins) != before+1 {
				t.Fatalf("no window for the verify output (%d windows)", len(wins))
			}
			log := allText(wins[len(wins)-1].Content())
			if !strings.Contains(log, "--- FAIL: TestCount") || strings.Contains(log, "\x1b") {
				t.Fatalf("the verify output shown: %q", log)
			}
		})
	}
}
