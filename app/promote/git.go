package promote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ErrNoGit means git is not installed on this computer (not on PATH).
var ErrNoGit = errors.New("git is not installed (not found on PATH): install git, or apply without --commit and --branch")

// ErrNotGitRepo means the project is not in a git repository.
var ErrNotGitRepo = errors.New("not a git repository")

// gitRepo runs the host's git, as the user, in a project that is (part
// of) a git repository. It never goes through a shell: every argument is
// one argv element.
type gitRepo struct {
	// dir is the project; top the repository's work tree, and prefix the
	// project's path in it ("" at the top, else "sub/dir/").
	dir, top, prefix string
	// env is added to the environment of every git run (a temporary
	// index: GIT_INDEX_FILE).
	env []string
}

// openGit finds the repository the project is in. Its error says what
// to do: install git, or make the project a repository.
func openGit(ctx context.Context, project string) (*gitRepo, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, ErrNoGit
	}
	g := &gitRepo{dir: project}
	out, err := g.run(ctx, nil, "rev-parse", "--show-toplevel", "--show-prefix")
	if err != nil {
		return nil, fmt.Errorf("%s is %w (git init makes it one, with a first commit)", project, ErrNotGitRepo)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) < 1 || lines[0] == "" {
		return nil, fmt.Errorf("%s: %w: it has no work tree", project, ErrNotGitRepo)
	}
	g.top = lines[0]
	if len(lines) > 1 {
		g.prefix = lines[1]
	}
	return g, nil
}

// GitError is a git command that failed, with what it printed.
type GitError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

func (e *GitError) Unwrap() error { return e.Err }

// run runs git with args in the project, stdin given, and returns its
// standard output.
func (g *gitRepo) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), g.env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &GitError{Args: args, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// line is run's output as one trimmed line.
func (g *gitRepo) line(ctx context.Context, args ...string) (string, error) {
	out, err := g.run(ctx, nil, args...)
	return strings.TrimSpace(string(out)), err
}

// exitCode is the exit status of a GitError's git, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// head is the commit HEAD names, or "" in a repository without commits.
func (g *gitRepo) head(ctx context.Context) (string, error) {
	out, err := g.line(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil && exitCode(err) == 1 {
		return "", nil
	}
	return out, err
}

// HeadCommit is the commit the project's repository has checked out
// (HEAD), or "" when the project is not in a git repository, the
// repository has no commit yet, or git is not installed. Runs record it
// with the baseline (sandbox.Meta.BaselineCommit): Branch starts there.
func HeadCommit(ctx context.Context, project string) string {
	g, err := openGit(ctx, project)
	if err != nil {
		return ""
	}
	h, _ := g.head(ctx)
	return h
}

// literal is a pathspec that matches p and nothing else (no glob, no
// magic), relative to the project.
func literal(p string) string { return ":(literal)" + p }
