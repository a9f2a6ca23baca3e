package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
)

// TestActionsShownSafely: a held request is the guest's through and
// through; its path, headers, body and the sentence made of them reach a
// terminal (and a pipe) with visible escapes only, in airlock actions,
// airlock diff and airlock status.
func TestActionsShownSafely(t *testing.T) {
	home, sb, _ := hostileSandbox(t)
	evil := "\x1b]52;c;Y3VybCBldmls\x07\x1b[2J\u202eevil"
	h := egress.Held{Time: time.Now(), Scheme: "https", Host: "api.github.com", Port: 443, Method: "POST",
		Path: "/repos/org/repo/issues/12/comments", Query: "q=" + evil,
		Header: http.Header{"X-Evil": {evil}, "Content-Type": {"application/json"}},
		Body:   []byte(`{"body":"` + strings.ReplaceAll(evil, "\x1b", `\u001b`) + `\nsecond line"}`), Rule: "api.github.com (POST)"}
	if _, err := sb.HoldAction(h, 1); err != nil {
		t.Fatal(err)
	}
	h.Path = "/x\x1b[2K" + strings.Repeat("y", 5000)
	h.Body = []byte(strings.Repeat("\x1b[8m", 1000))
	if _, err := sb.HoldAction(h, 1); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"actions", sb.ID}, {"actions", sb.ID, "1", "2"}, {"diff", sb.ID}, {"diff", sb.ID, "--stat"}, {"status", sb.ID}} {
		out := onTerminal(t, home, args...)
		checkShownSafely(t, strings.Join(args, " "), out)
		if args[0] != "actions" || len(args) == 2 {
			for _, l := range strings.Split(out, "\n") {
				if len([]rune(l)) > 600 {
					t.Errorf("%v: a line of %d characters", args, len([]rune(l)))
				}
			}
		}
		if args[0] == "actions" && !strings.Contains(out, "Comment on issue #12 of org/repo: ") {
			t.Errorf("%v: no sentence:\n%s", args, out)
		}
	}
	// A pipe gets the same safe text: the actions are not a patch.
	code, out, errOut := airlockCLI(t, home, "actions", sb.ID, "1")
	if code != 0 {
		t.Fatalf("actions: %d %s", code, errOut)
	}
	checkShownSafely(t, "actions to a pipe", out, `\x1b]52;c;`)
	code, out, _ = airlockCLI(t, home, "diff", sb.ID)
	if code != 0 || !strings.Contains(out, "# airlock: 2 actions held for review") {
		t.Fatalf("diff to a pipe:\n%s", out)
	}
	checkShownSafely(t, "diff's actions to a pipe", out[strings.Index(out, "# airlock: 2 actions"):])
}

// TestActionsVerdictsAndBadInput: verdicts are recorded and shown,
// contradictory or unknown numbers are refused with what to do, and
// --dry-run records nothing.
func TestActionsVerdictsAndBadInput(t *testing.T) {
	home, sb, _ := hostileSandbox(t)
	for i := 0; i < 3; i++ {
		if _, err := sb.HoldAction(egress.Held{Time: time.Now(), Scheme: "https", Host: "hooks.slack.com", Port: 443, Method: "POST", Path: "/services/T/B/X", Body: []byte(`{"text":"hi"}`)}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"actions", sb.ID, "--approve", "1", "--reject", "1"}, "action 1 is given two verdicts"},
		{[]string{"actions", sb.ID, "--approve", "9"}, "has no action 9 (it has 1 to 3)"},
		{[]string{"actions", sb.ID, "--approve", "x"}, `"x" is not an action number`},
		{[]string{"apply", sb.ID, "--send", "0"}, `"0" is not an action number`},
		{[]string{"apply", sb.ID}, "or send held actions with --send N"},
	} {
		code, _, errOut := airlockCLI(t, home, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
	code, out, errOut := airlockCLI(t, home, "actions", sb.ID, "--approve", "1,3", "--reject", "#2")
	if code != 0 || !strings.Contains(out, "#1   approved  Post to a Slack channel (incoming webhook): “hi”") || !strings.Contains(out, "#2   rejected") {
		t.Fatalf("decide: %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = airlockCLI(t, home, "apply", sb.ID, "--dry-run")
	if code != 0 || !strings.Contains(out, "would send   #1") || strings.Contains(out, "#2") || !strings.Contains(out, "would send   #3") || strings.Contains(out, "would write") {
		t.Fatalf("dry run of the approved actions alone:\n%s", out)
	}
	code, out, _ = airlockCLI(t, home, "apply", sb.ID, "--send", "2", "--dry-run")
	if code != 0 || !strings.Contains(out, "would send   #1") || !strings.Contains(out, "would send   #2") || !strings.Contains(out, "would send   #3") {
		t.Fatalf("dry run:\n%s", out)
	}
	d, err := sb.Decisions(t.Context())
	if err != nil || d.Actions[2] != "reject" {
		t.Fatalf("the dry run changed a verdict: %v %v", d.Actions, err)
	}
	code, out, _ = airlockCLI(t, home, "--json", "status", sb.ID)
	if code != 0 || !strings.Contains(out, `"actions"`) {
		t.Fatalf("status --json:\n%s", out)
	}
}

// TestApplyAllSaysActionsWait: apply --all writes the files and sends no
// held action no one decided on, and says which wait and how to send
// them; decided ones are not named, and --json keeps its output one
// object.
func TestApplyAllSaysActionsWait(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		home, sb, _ := hostileSandbox(t)
		for i := 0; i < 3; i++ {
			if _, err := sb.HoldAction(egress.Held{Time: time.Now(), Scheme: "https", Host: "hooks.slack.com", Port: 443, Method: "POST", Path: "/services/T/B/X", Body: []byte(`{"text":"hi"}`)}, 1); err != nil {
				t.Fatal(err)
			}
		}
		if code, _, errOut := airlockCLI(t, home, "actions", sb.ID, "--reject", "2"); code != 0 {
			t.Fatalf("reject: %s", errOut)
		}
		args := []string{"apply", sb.ID, "--all"}
		if asJSON {
			args = append([]string{"--json"}, args...)
		}
		code, out, errOut := airlockCLI(t, home, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		want := "2 held actions wait for your decision, not sent (#1 #3): airlock actions " + sb.ID + " shows them; send with airlock apply " + sb.ID + " --send N"
		if !strings.Contains(errOut, want) {
			t.Errorf("%v: stderr does not say %q:\n%s", args, want, errOut)
		}
		if asJSON && (!strings.HasPrefix(strings.TrimSpace(out), "{") || strings.Contains(out, "wait for your decision")) {
			t.Errorf("--json's output is not one object:\n%s", out)
		}
		if j, err := sb.SendJournal(); err != nil || len(j) != 0 {
			t.Errorf("an apply sent undecided actions: %v %v", j, err)
		}
	}
}
