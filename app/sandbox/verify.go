package sandbox

import (
	"errors"
	"fmt"
	"os"
)

// VerifyFile keeps the verify command's output in the sandbox directory.
const VerifyFile = "verify.log"

// EventVerified records the verify step's result in the audit log.
const EventVerified EventKind = "verified"

// VerifyResult is what the verify step found: the command, its exit code
// (TimeoutExitCode when it ran past the time limit) and how long it took.
type VerifyResult struct {
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	Passed     bool   `json:"passed"`
	DurationMS int64  `json:"duration_ms"`
	// Error says why it could not run at all (the guest went away).
	Error string `json:"error,omitempty"`
}

// String is the verdict for people: "passed", "FAILED (exit 1)".
func (v *VerifyResult) String() string {
	switch {
	case v == nil:
		return "-"
	case v.Error != "":
		return "could not run: " + v.Error
	case v.Passed:
		return "passed"
	case v.ExitCode == TimeoutExitCode:
		return "FAILED (timed out)"
	default:
		return fmt.Sprintf("FAILED (exit %d)", v.ExitCode)
	}
}

// VerifyLog is the verify command's output (nil when none ran).
func (sb *Sandbox) VerifyLog() ([]byte, error) {
	data, err := os.ReadFile(sb.Path(VerifyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// VerifyGate says, for the top of a review and before an apply, what the
// sandbox's verify found: "tests passed in the sandbox (go test ./...)",
// "verify FAILED in the sandbox (exit 1): go test ./...", or that none
// ran. ok is true only when it passed.
func (m Meta) VerifyGate() (text string, ok bool) {
	v := m.Verify
	switch {
	case v == nil:
		return `no verify ran in the sandbox: nothing checked these changes (airlock run --verify "CMD", or verify = "CMD" in the project's airlock.toml)`, false
	case v.Error != "":
		return fmt.Sprintf("verify could not run in the sandbox (%s): %s", v.Command, v.Error), false
	case v.Passed:
		return fmt.Sprintf("tests passed in the sandbox (%s)", v.Command), true
	}
	return fmt.Sprintf("verify %s in the sandbox: %s", v.String(), v.Command), false
}
