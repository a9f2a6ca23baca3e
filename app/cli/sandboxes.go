package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/review"
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

// openChangeset opens sandbox id and builds its changes for review.
func (e *env) openChangeset(ctx context.Context, id string) (*sandbox.Sandbox, *review.Changeset, error) {
	sb, err := e.openSandbox(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	cs, err := sb.Changeset(ctx)
	return sb, cs, err
}

// forEach does do for each name given, in order, saying "VERB ID" for each
// done (with --json, {"VERB": [IDs]} at the end); an error for one does
// not stop the others, and they are returned together.
func (e *env) forEach(names []string, verb string, do func(name string) (id string, err error)) error {
	done := []string{}
	var errs []error
	for _, name := range names {
		id, err := do(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, id)
		if !e.json {
			fmt.Fprintf(e.stdout, "%s %s\n", verb, id)
		}
	}
	if e.json {
		if err := e.printJSON(map[string]any{verb: done}); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
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
