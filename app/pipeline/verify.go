package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/internal/lockio"
)

// verify runs RunOptions.Verify in /workspace with the command's
// environment; its output streams live and into verify.log, and the
// result goes to sandbox.json and the audit log. A failing verify
// command is a result, not an error of the run.
func (r *runner) verify(ctx context.Context, m Machine) error {
	if r.o.Verify == "" {
		return nil
	}
	f, err := os.OpenFile(r.sb.Path(sandbox.VerifyFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer f.Close()
	capped := headtail.New(f, "verify log", TranscriptHead, TranscriptTail)
	defer capped.Close() // on an early return too: the tail is written
	out := lockio.NewWriter(capped)
	r.progress(Progress{Step: StepVerify, Message: "verifying: " + r.o.Verify})
	// Bounded as the command is: a guest that does not end it in time
	// is stopped.
	runCtx, stop := r.timeLimited(ctx, m)
	defer stop()
	t := time.Now()
	err = m.Run(runCtx, client.Command{
		Args: []string{"sh", "-c", r.o.Verify}, Dir: sandbox.Workspace, Env: r.commandEnv(), User: r.user,
		Stdout: teeWriter(r.o.Stdout, out), Stderr: teeWriter(r.o.Stderr, out), Jail: r.jail(),
	})
	res := &sandbox.VerifyResult{Command: r.o.Verify, DurationMS: time.Since(t).Milliseconds()}
	var exit *client.ExitError
	switch {
	case err == nil:
		res.Passed = true
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case runCtx.Err() != nil && ctx.Err() == nil:
		res.ExitCode = sandbox.TimeoutExitCode
		fmt.Fprintf(out, "\nairlock: the verify command ran longer than %s and was killed\n", r.o.Timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("verify: %w", ctx.Err())
	default:
		res.ExitCode, res.Error = -1, err.Error()
	}
	if err := r.closeCapped(capped, sandbox.VerifyFile); err != nil {
		return err
	}
	if _, err := r.sb.Update(func(mt *sandbox.Meta) { mt.Verify = res }); err != nil {
		return err
	}
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventVerified, Data: map[string]any{
		"command": res.Command, "exit_code": res.ExitCode, "passed": res.Passed, "duration_ms": res.DurationMS, "error": res.Error,
	}})
}
