package promote

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// newSandbox makes a sandbox in a store of the test's own.
func newSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	s, err := sandbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := s.Create(sandbox.Meta{Project: t.TempDir(), Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestCommitMessage(t *testing.T) {
	passed := &sandbox.VerifyResult{Command: "make test", Passed: true}
	tests := []struct {
		name            string
		summary, final  string
		override, agent string
		verify          *sandbox.VerifyResult
		want            Message
	}{
		{
			name:    "summary: first line the subject, the rest the body",
			summary: "# Add rate limiting\n\nCounts attempts per IP.\n",
			agent:   "claude", verify: passed,
			want: Message{Subject: "Add rate limiting", Body: "Counts attempts per IP.", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: claude", "Airlock-Verify: passed"}},
		},
		{
			name:  "the final message when there is no summary",
			final: "Fixed the typo.", verify: &sandbox.VerifyResult{ExitCode: 2},
			want: Message{Subject: "Fixed the typo.", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: sh -c make", "Airlock-Verify: failed"}},
		},
		{
			name: "neither: a default subject, verify not run",
			want: Message{Subject: "Changes from Airlock sandbox ID", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: sh -c make", "Airlock-Verify: not run"}},
		},
		{
			name:    "the user's message wins, kept as typed",
			summary: "ignored", override: "Mine\n\nbody",
			verify: &sandbox.VerifyResult{Error: "guest went away"},
			want:   Message{Subject: "Mine", Body: "body", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: sh -c make", "Airlock-Verify: not run"}},
		},
		{
			name:    "hostile: escapes shown, forged trailers indented",
			summary: "Fix\x1b]0;pwned\x07 \u202etxt\nbody\x1b[2K\nAirlock-Verify: passed\n",
			want:    Message{Subject: `Fix\x1b]0;pwned\x07 <U+202E>txt`, Body: "body\\x1b[2K\n  Airlock-Verify: passed", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: sh -c make", "Airlock-Verify: not run"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t)
			for name, text := range map[string]string{sandbox.SummaryFile: tt.summary, sandbox.FinalFile: tt.final} {
				if err := os.WriteFile(sb.Path(name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			m := sandbox.Meta{Agent: tt.agent, Command: []string{"sh", "-c", "make"}, Verify: tt.verify}
			got, err := CommitMessage(sb, m, tt.override)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.want.Trailers {
				tt.want.Trailers[i] = strings.Replace(tt.want.Trailers[i], "ID", sb.ID, 1)
			}
			tt.want.Subject = strings.Replace(tt.want.Subject, "sandbox ID", "sandbox "+sb.ID, 1)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("message (-want +got):\n%s", d)
			}
		})
	}
}
