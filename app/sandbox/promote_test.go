package sandbox

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCommitMessage(t *testing.T) {
	passed := &VerifyResult{Command: "make test", Passed: true}
	tests := []struct {
		name            string
		summary, final  string
		override, agent string
		verify          *VerifyResult
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
			final: "Fixed the typo.", verify: &VerifyResult{ExitCode: 2},
			want: Message{Subject: "Fixed the typo.", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: sh -c make", "Airlock-Verify: failed"}},
		},
		{
			name: "neither: a default subject, verify not run",
			want: Message{Subject: "Changes from Airlock sandbox ID", Trailers: []string{"Airlock-Sandbox: ID", "Airlock-Agent: sh -c make", "Airlock-Verify: not run"}},
		},
		{
			name:    "the user's message wins, kept as typed",
			summary: "ignored", override: "Mine\n\nbody",
			verify: &VerifyResult{Error: "guest went away"},
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
			s := newStore(t)
			sb := mkSandbox(t, s, "0123abcd")
			for name, text := range map[string]string{SummaryFile: tt.summary, FinalFile: tt.final} {
				if err := os.WriteFile(sb.Path(name), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			m := Meta{Agent: tt.agent, Command: []string{"sh", "-c", "make"}, Verify: tt.verify}
			got, err := sb.CommitMessage(m, tt.override)
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

func TestStage(t *testing.T) {
	for _, tt := range []struct {
		m    Meta
		want Stage
	}{
		{Meta{Status: StatusReady}, StageSandbox},
		{Meta{Status: StatusApplied}, StageApplied},
		{Meta{Status: StatusReady, Promotion: &Promotion{Commit: "c", NewBranch: true}}, StageCommitted},
		{Meta{Status: StatusApplied, Promotion: &Promotion{Commit: "c"}}, StageCommitted},
		{Meta{Status: StatusReady, Promotion: &Promotion{Commit: "c", Pushed: time.Unix(1, 0)}}, StagePushed},
	} {
		if got := tt.m.stageOf(); got != tt.want {
			t.Errorf("%+v: stage %q, want %q", tt.m, got, tt.want)
		}
	}
}
