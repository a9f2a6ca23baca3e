package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/review"
)

func newReplyCmd(e *env) *cobra.Command {
	var f runFlags
	var messageFile string
	cmd := &cobra.Command{
		Use:   "reply ID --message TEXT",
		Short: "Send a sandbox back to its agent with your message, comments and rejected hunks, for another round",
		Long: `reply continues a reviewed sandbox: the agent gets your message, the
comments you left on lines and files that were not sent yet and the hunks
you rejected (from the review kept with the sandbox: the app's review
window), and works on its previous result in a fresh VM. An agent preset
(--agent at run time) continues its own conversation with its continue
command; a plain command or script runs again with the prompt in
AIRLOCK_REPLY and the round number in AIRLOCK_ROUND.

The changes are then collected again: airlock diff ID shows the total
against your project's snapshot, airlock diff ID --round N what round N
changed. Each earlier round is kept under rounds/N/ in the sandbox. The
verify command, if the run had one, runs again.

Each comment is sent once: the reply marks it "sent in round N" once the
agent's command started; a resolved comment is never sent. Verdicts carry
to the next round only where the round left the change as it was.

The limits and network flags are those of airlock run.`,
		Example: `  airlock reply 3f2a --message "keep the old function name; the tests must pass"
  airlock reply 3f2a --message-file notes.md`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("image") {
				f.image = "" // the sandbox's image
			}
			return runReply(cmd.Context(), e, &f, messageFile, args[0])
		},
	}
	f.bootFlags.register(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&f.message, "message", "m", "", "what the agent should do differently")
	fl.StringVar(&messageFile, "message-file", "", "read the message from FILE")
	f.limits.registerTimeout(fl, "kill the agent after this long and collect what it changed (exit code 124)")
	f.limits.registerRun(fl)
	f.netFlags.register(cmd)
	fl.StringVar(&f.verify, "verify", "", "a shell command to run in the VM after the agent (default: the run's)")
	fl.BoolVar(&f.noVerify, "no-verify", false, "skip the verify step")
	fl.BoolVar(&f.trustProject, "trust-project", false, "confirm what the project's airlock.toml asks for beyond your configuration")
	f.fanOut = 1
	return cmd
}

// runReply sends sandbox id back to its agent with the message of f (or
// of messageFile): the round is planned and run as airlock run's, on the
// sandbox's project, image and arch unless a flag says otherwise.
func runReply(ctx context.Context, e *env, f *runFlags, messageFile, id string) error {
	switch {
	case f.message != "" && messageFile != "":
		return errors.New("give --message or --message-file, not both")
	case messageFile != "":
		b, err := os.ReadFile(messageFile)
		if err != nil {
			return fmt.Errorf("read --message-file: %w", err)
		}
		f.message = string(b)
	}
	if strings.TrimSpace(f.message) == "" {
		return errors.New("say what the agent should do differently: --message TEXT or --message-file FILE")
	}
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return err
	}
	f.replyTo = sb.ID
	return runRun(ctx, e, f, plan.Request{})
}

// replyNote says what goes to the agent with the message.
func replyNote(fb review.Feedback) string {
	if fb.Empty() {
		return "sending your message (the review has no comments to send and no rejected hunks)"
	}
	return "sending your message with " + fb.Summary() + " from the review"
}
