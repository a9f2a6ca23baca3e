// Package login signs agent CLIs in with their users' subscriptions while
// the tokens stay on the host. A Login reads the sign-in a CLI keeps on
// the host (Codex's ~/.codex/auth.json after `codex login`, Gemini CLI's
// ~/.gemini/oauth_creds.json after "Login with Google"), refreshes it
// there when it would end during the run, and gives the run what the
// guest needs: placeholders where the CLI reads its tokens (a file in the
// agent's home, an environment variable) and the secrets the egress proxy
// puts in their place on the vendor's hosts. The guest never holds a
// token, and cannot refresh one: the hosts that refresh are not allowed.
//
// It must not import vm, guest, sync, review, fyne, or the app packages
// that run things (app/sandbox, app/machine/launch, app/pipeline, app/plan,
// app/cli, app/gui).
package login

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/internal/atomicfile"
	"golang.org/x/sys/unix"
)

// Login is one way of signing an agent CLI in with a subscription.
type Login interface {
	// Name is the login's name, as an agent preset's login key gives it
	// ("chatgpt", "google").
	Name() string
	// How says, for people, what the login is and how to get it ("a
	// ChatGPT plan: run `codex login` on this computer").
	How() string
	// Find says whether this host has the login, and where it is kept,
	// for people (a path); it reads, never writes, and never refreshes.
	Find(env Env) (where string, ok bool)
	// Grant refreshes the login on the host when it would end within
	// d (the run's time limit; 0 for none) and returns what the run
	// needs.
	Grant(ctx context.Context, env Env, d time.Duration) (*Grant, error)
}

// Env is where a Login looks: the user's home and environment.
type Env struct {
	Home   string
	Getenv func(string) string
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// Grant is what a run signed in with a Login needs.
type Grant struct {
	// Secrets are the tokens, each with its placeholder: the proxy puts
	// Value in Header on requests to Host. Their Name is a label for the
	// audit log (no variable of the guest holds them unless Env says so).
	Secrets []egress.Secret
	// Allow are the HOST[:PORT] patterns the CLI's requests need in this
	// mode (the secrets' hosts among them).
	Allow []string
	// Env is added to the command's environment (placeholders, the
	// switch to the login mode).
	Env map[string]string
	// Files are written into the run's user's home before the command.
	Files []File
}

// File is a file a Grant puts in the guest.
type File struct {
	// Path is relative to the run's user's home (".codex/auth.json").
	Path string
	// Mode is its permission bits (0600).
	Mode fs.FileMode
	Data []byte
}

// Validate reports what is wrong with f.
func (f File) Validate() error {
	if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "." || f.Path == ".." || strings.HasPrefix(f.Path, "../") {
		return fmt.Errorf("login file %q: want a clean path relative to the home", f.Path)
	}
	if f.Mode&^fs.ModePerm != 0 {
		return fmt.Errorf("login file %s: mode %v is not permission bits", f.Path, f.Mode)
	}
	return nil
}

var logins = map[string]Login{}

// register adds l to the logins presets may name.
func register(l Login) { logins[l.Name()] = l }

// Lookup returns the login name.
func Lookup(name string) (Login, bool) {
	l, ok := logins[name]
	return l, ok
}

// Names lists the logins, sorted.
func Names() []string {
	out := make([]string, 0, len(logins))
	for n := range logins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// lockFile takes an exclusive lock on path (created if need be), waiting
// for another holder.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the sign-in: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the sign-in %s: %w", path, err)
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

// writeFileAtomic writes v as JSON to path, readable by its owner only,
// so that a reader sees the old file or the new one, never half.
func writeFileAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}
