package sandbox

import "time"

// Promotion of a sandbox's changes into the project's git history is
// app/promote's; what the store keeps of it is here: the stage, the
// commit made and where it went (Meta.Stage, Meta.Promotion), and the
// audit events app/promote writes.

// Stage is how far a sandbox's changes have climbed towards the project's
// history: from the sandbox into the working tree, into a commit, and
// pushed for review.
type Stage string

const (
	StageSandbox   Stage = "sandbox"   // the changes are only in the sandbox
	StageApplied   Stage = "applied"   // written into the working tree
	StageCommitted Stage = "committed" // in a commit (apply --commit or --branch)
	StagePushed    Stage = "pushed"    // that commit's branch was pushed (airlock push)
)

// Audit events of promotion.
const (
	EventCommitted EventKind = "committed" // a commit of the approved changes: its id, branch and parent
	EventExported  EventKind = "exported"  // the approved changes written as a patch or an mbox
	// EventBranchPushed is a push of the sandbox's branch to a remote
	// (airlock push); "pushed" already names the baseline reaching the VM.
	EventBranchPushed EventKind = "branch_pushed"
)

// Promotion is the commit made of a sandbox's changes, and where it went.
type Promotion struct {
	Commit string `json:"commit"`
	// Parent is the commit it was made on: the baseline's commit for a
	// new branch, HEAD for a commit in the working tree.
	Parent string `json:"parent,omitempty"`
	// Branch is the branch the commit is on; NewBranch is set when
	// apply --branch made it (and only such a branch is pushed).
	Branch    string    `json:"branch,omitempty"`
	NewBranch bool      `json:"new_branch,omitempty"`
	Time      time.Time `json:"time"`
	// Remote, Pushed and PullRequest are filled in by a push
	// (promote.Push).
	Remote      string    `json:"remote,omitempty"`
	Pushed      time.Time `json:"pushed,omitzero"`
	PullRequest string    `json:"pull_request,omitempty"`
}

// stageOf works out the stage from the status and the promotion.
func (m Meta) stageOf() Stage {
	switch {
	case m.Promotion != nil && !m.Promotion.Pushed.IsZero():
		return StagePushed
	case m.Promotion != nil:
		return StageCommitted
	case m.Status == StatusApplied:
		return StageApplied
	}
	return StageSandbox
}
