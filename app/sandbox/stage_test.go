package sandbox

import (
	"testing"
	"time"
)

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
