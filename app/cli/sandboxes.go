package cli

import (
	"context"
	"os"

	"github.com/airlock-dev/airlock/app/config"

	"github.com/airlock-dev/airlock/app/sandbox"
)

func (e *env) sandboxes() (*sandbox.Store, error) {
	h, err := e.home()
	if err != nil {
		return nil, err
	}
	st, err := sandbox.Open(h)
	if err != nil {
		return nil, err
	}
	st.HostExec, st.MergeTool = userHostExec, userMergeTool
	return st, nil
}

// userHostExec reads the user's [review] host_exec patterns from
// config.toml, each time a changeset is built.
func userHostExec() ([]string, error) {
	path, err := config.UserPath(os.Getenv)
	if err != nil {
		return nil, err
	}
	u, err := config.LoadUser(path)
	return u.Review.HostExec, err
}

// userMergeTool reads the user's [review] merge_tool from config.toml,
// each time one is run.
func userMergeTool() ([]string, error) {
	path, err := config.UserPath(os.Getenv)
	if err != nil {
		return nil, err
	}
	u, err := config.LoadUser(path)
	if err != nil {
		return nil, err
	}
	return u.Review.MergeToolArgv()
}

// openSandbox resolves an ID (or unique prefix) and first finishes any
// apply of it that was interrupted, as every command that touches a
// sandbox must.
func (e *env) openSandbox(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	st, err := e.sandboxes()
	if err != nil {
		return nil, err
	}
	sb, err := st.Get(id)
	if err != nil {
		return nil, err
	}
	done, err := sb.Recover(ctx)
	for _, j := range done {
		e.note("finished an apply of %s that was interrupted (journal %s)", sb.ID, j)
	}
	return sb, err
}

// syncMode names a sandbox's sync mode; sandboxes from before the mode was
// recorded were copies.
func syncMode(m sandbox.SyncMode) sandbox.SyncMode {
	if m == "" {
		return sandbox.SyncCopy
	}
	return m
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
