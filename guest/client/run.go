package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/airlock-dev/airlock/guest"
)

// WindowSize is a terminal size in character cells.
type WindowSize struct{ Rows, Cols int }

// TTY asks for a pseudo-terminal.
type TTY struct {
	// Term is the TERM of the command, e.g. "xterm-256color".
	Term string
	// Rows and Cols are the initial size.
	Rows, Cols int
	// Resize, if set, delivers size changes while the command runs.
	Resize <-chan WindowSize
}

// Command is a command to run in the guest. Exactly one of Args and
// Script is set.
type Command struct {
	// Args is the argv of the command. It is quoted for the guest's
	// /bin/sh, so every element reaches the command exactly as given.
	Args []string
	// Script is a shell command line run as-is by /bin/sh -c.
	Script string
	// Env is added to the guest's default environment (PATH, HOME, and
	// TERM with a TTY).
	Env map[string]string
	// Dir is the absolute working directory; empty means the guest's HOME
	// (User's home when User is set).
	Dir string
	// User, if set, runs the command as that user of the guest (its uid,
	// groups and HOME from the guest's /etc/passwd); empty runs it as the
	// agent's own user (root in a VM).
	User string
	// Stdin, if set, is copied to the command's input, which gets EOF when
	// Stdin does. Run does not wait for Stdin to be read to its end: a
	// copy blocked on Stdin may outlive Run.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; nil discards it.
	// Run returns only after both have received everything.
	Stdout, Stderr io.Writer
	// TTY, if set, runs the command under a pseudo-terminal; the terminal
	// merges the command's stderr into Stdout.
	TTY *TTY
	// Jail, when not nil, runs the command in the guest agent's jail
	// (guest.RequestJail), writes allowed below these directories, the
	// command's home and /tmp only: for the sandbox's command and its
	// verify.
	Jail []string
}

// ExitError is returned by Run when the command did not exit with status 0.
type ExitError struct {
	// Status is the exit status; zero when the command was killed by a
	// signal.
	Status int
	// Signal is the name of the signal that killed the command, without
	// "SIG" ("KILL"), or empty.
	Signal string
	// Message is the guest's explanation accompanying a signal, if any.
	Message string
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		s := "remote command killed by signal " + e.Signal
		if e.Message != "" {
			s += ": " + e.Message
		}
		return s
	}
	return fmt.Sprintf("remote command exited with status %d", e.Status)
}

// ExitCode returns the status as a shell reports it: Status, or 128 plus
// the signal number for a death by signal.
func (e *ExitError) ExitCode() int {
	if e.Signal == "" {
		return e.Status
	}
	return 128 + linuxSignals[e.Signal]
}

// linuxSignals numbers signals as Linux does on amd64 and arm64 (the guest
// is always Linux, whatever the host).
var linuxSignals = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "TRAP": 5, "ABRT": 6, "BUS": 7,
	"FPE": 8, "KILL": 9, "USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13,
	"ALRM": 14, "TERM": 15, "STKFLT": 16, "CHLD": 17, "CONT": 18, "STOP": 19,
	"TSTP": 20, "TTIN": 21, "TTOU": 22, "URG": 23, "XCPU": 24, "XFSZ": 25,
	"VTALRM": 26, "PROF": 27, "WINCH": 28, "IO": 29, "PWR": 30, "SYS": 31,
}

// killWait bounds how long Run waits, after its ctx ended, for the guest
// to confirm that the session is closed.
const killWait = 5 * time.Second

// Run runs cmd in the guest and waits for it. It returns nil when the
// command exits with status 0 and an *ExitError when it exits otherwise.
// When ctx ends first, the command (with its process group) is killed and
// Run returns ctx's error.
//
// Dir, Env and TTY are requested before the command starts; a guest that
// refuses one (Dir does not exist) fails Run before anything runs.
func (c *Client) Run(ctx context.Context, cmd Command) error {
	line, err := cmd.line()
	if err != nil {
		return err
	}
	if cmd.Dir != "" && !path.IsAbs(cmd.Dir) {
		return fmt.Errorf("run: Dir %q is not an absolute guest path", cmd.Dir)
	}
	s, err := c.ssh.NewSession()
	if err != nil {
		return fmt.Errorf("open session: %w", err)
	}
	defer s.Close()
	if err := setup(s, cmd); err != nil {
		return err
	}
	s.Stdout, s.Stderr = cmd.Stdout, cmd.Stderr
	var stdin io.WriteCloser
	if cmd.Stdin != nil {
		// Not s.Stdin: Wait would wait for the copy, so a Stdin that never
		// ends would hang Run after the command exited.
		if stdin, err = s.StdinPipe(); err != nil {
			return fmt.Errorf("open stdin: %w", err)
		}
	}
	if err := s.Start(line); err != nil {
		return fmt.Errorf("start remote command: %w", err)
	}
	if stdin != nil {
		go func() {
			_, _ = io.Copy(stdin, cmd.Stdin)
			_ = stdin.Close()
		}()
	}

	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	var resize <-chan WindowSize
	if cmd.TTY != nil {
		resize = cmd.TTY.Resize
	}
	for {
		select {
		case err := <-done:
			return exitError(err)
		case ws, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			if err := s.WindowChange(ws.Rows, ws.Cols); err != nil {
				c.log.Debug("window change", "err", err)
			}
		case <-ctx.Done():
			_ = s.Signal(ssh.SIGKILL)
			_ = s.Close()
			// A guest that is alive confirms the close at once; a stuck one
			// must not hold Run (its output copies may then outlive Run).
			select {
			case <-done:
			case <-time.After(killWait):
				c.log.Debug("guest did not confirm the end of a canceled command")
			}
			return ctx.Err()
		}
	}
}

// setup sends the session's requests that precede the command.
func setup(s *ssh.Session, cmd Command) error {
	keys := make([]string, 0, len(cmd.Env))
	for k := range cmd.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := s.Setenv(k, cmd.Env[k]); err != nil {
			return fmt.Errorf("set %s in the guest: %w", k, err)
		}
	}
	if cmd.Dir != "" {
		ok, err := s.SendRequest(guest.RequestWorkdir, true, ssh.Marshal(struct{ Dir string }{cmd.Dir}))
		if err != nil {
			return fmt.Errorf("set working directory: %w", err)
		}
		if !ok {
			return fmt.Errorf("set working directory: the guest has no directory %s", cmd.Dir)
		}
	}
	if cmd.User != "" {
		ok, err := s.SendRequest(guest.RequestUser, true, ssh.Marshal(struct{ Name string }{cmd.User}))
		if err != nil {
			return fmt.Errorf("run as %s: %w", cmd.User, err)
		}
		if !ok {
			return fmt.Errorf("run as %s: the guest has no such user (the minimal image has root only; the full image has agent)", cmd.User)
		}
	}
	if cmd.Jail != nil {
		ok, err := s.SendRequest(guest.RequestJail, true, ssh.Marshal(struct{ Write string }{strings.Join(cmd.Jail, "\x00")}))
		if err != nil {
			return fmt.Errorf("jail the command: %w", err)
		}
		if !ok {
			return errors.New("jail the command: the guest agent refused (an image whose agent has no jail: build it again)")
		}
	}
	if t := cmd.TTY; t != nil {
		modes := ssh.TerminalModes{ssh.ECHO: 1, ssh.TTY_OP_ISPEED: 38400, ssh.TTY_OP_OSPEED: 38400}
		if err := s.RequestPty(t.Term, t.Rows, t.Cols, modes); err != nil {
			return fmt.Errorf("request pty: %w", err)
		}
	}
	return nil
}

// line is the command line the guest's shell runs.
func (cmd Command) line() (string, error) {
	switch {
	case len(cmd.Args) > 0 && cmd.Script != "":
		return "", errors.New("run: command has both Args and Script")
	case cmd.Script != "":
		return cmd.Script, nil
	case len(cmd.Args) > 0:
		return quoteArgs(cmd.Args), nil
	}
	return "", errors.New("run: command has neither Args nor Script")
}

// quoteArgs joins args into a POSIX shell command line that runs exactly
// that argv.
func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = quote(a)
	}
	return strings.Join(q, " ")
}

func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// exitError turns the session's Wait error into Run's result.
func exitError(err error) error {
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ee.Signal() != "" {
			return &ExitError{Signal: ee.Signal(), Message: ee.Msg()}
		}
		return &ExitError{Status: ee.ExitStatus()}
	}
	var missing *ssh.ExitMissingError
	if errors.As(err, &missing) {
		return fmt.Errorf("remote command ended without an exit status (did the guest link drop?): %w", err)
	}
	return fmt.Errorf("wait for remote command: %w", err)
}
