package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/airlock-dev/airlock/app/egress"
)

// UserFileName is the user's configuration file, in UserDir.
const UserFileName = "config.toml"

// User is the user's config.toml:
//
//	open_network = false            # true: no proxy, no allow-list
//	[limits]
//	cpus = 4
//	memory = "4G"
//	[network]
//	allow = ["github.com"]
//	[[network.secret]]
//	host = "api.anthropic.com"
//	header = "x-api-key"
//	env = "ANTHROPIC_API_KEY"
//
//	[secrets]                       # where no Keychain holds them
//	ANTHROPIC_API_KEY = "sk-ant-…"
//
//	[review]
//	host_exec = ["scripts/deploy/**", "tools/*.py"]
//
// The zero value is a user without one: no host allowed.
type User struct {
	// Limits are the user's limits; DefaultLimits fill what it leaves out
	// (in Resolve, so that a project file can tell "not set" from "set").
	Limits Limits `toml:"limits"`
	// OpenNetwork gives every sandbox an unprotected NAT network device.
	OpenNetwork bool `toml:"open_network"`
	// Network is the allow-list, method limits and secret rules.
	Network Network `toml:"network"`
	// Secrets are values of secrets by name (SecretRule.Env). They never
	// leave the host. On macOS the Keychain is looked up first.
	Secrets map[string]string `toml:"secrets"`
	// Review tunes the review of every sandbox.
	Review Review `toml:"review"`
}

// Review is the user's [review] table.
type Review struct {
	// HostExec adds path patterns to Airlock's built-in list of files
	// that run on the user's machine later (git hooks, .envrc, Makefile,
	// …): a change to a matching file is marked "runs on your machine"
	// and left out of apply --all unless named. Patterns are relative to
	// the project root; one without a slash matches a name at any depth,
	// "**" any number of directories. Only the user's file has the key: a
	// project's airlock.toml cannot change the list.
	HostExec []string `toml:"host_exec"`
}

// Validate reports every unusable pattern.
func (r Review) Validate() error {
	var errs []error
	for i, p := range r.HostExec {
		if err := validPathPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("review.host_exec %d: %w", i+1, err))
		}
	}
	return errors.Join(errs...)
}

// validPathPattern checks a [review] host_exec pattern (review matches
// them): not empty, relative, no "..", every element a valid path.Match
// glob.
func validPathPattern(pattern string) error {
	p := strings.TrimSuffix(strings.TrimPrefix(pattern, "/"), "/")
	if strings.TrimSpace(p) == "" || strings.ContainsRune(p, 0) {
		return fmt.Errorf("%q: want a path pattern such as \"scripts/deploy/**\" or \"*.py\"", pattern)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." || e == "" {
			return fmt.Errorf("%q: want a path inside the project (no \"..\", no empty elements)", pattern)
		}
		if _, err := path.Match(e, ""); err != nil {
			return fmt.Errorf("%q: %q is not a valid glob", pattern, e)
		}
	}
	return nil
}

// UserPath is where the user's configuration lives:
// $XDG_CONFIG_HOME/airlock/config.toml, ~/.config/airlock/config.toml
// without it (on macOS too: it is a file people edit).
func UserPath(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "airlock", UserFileName), nil
	}
	h := getenv("HOME")
	if h == "" {
		var err error
		if h, err = os.UserHomeDir(); err != nil {
			return "", fmt.Errorf("find the user configuration: %w", err)
		}
	}
	return filepath.Join(h, ".config", "airlock", UserFileName), nil
}

// LoadUser reads the user's configuration at path: load, fill defaults,
// validate, every problem reported at once. A missing file is the zero
// User.
func LoadUser(path string) (User, error) {
	var u User
	data, err := readSmall(path)
	if errors.Is(err, fs.ErrNotExist) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("read %s: %w", path, err)
	}
	if err := decodeStrict(data, &u, "open_network, [limits] "+limitKeys()+", [network], [secrets], [review] host_exec"); err != nil {
		return User{}, fmt.Errorf("read %s: %w", path, err)
	}
	u.defaults()
	if err := u.Validate(); err != nil {
		return User{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(u.Secrets) > 0 && runtime.GOOS != "windows" {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return User{}, fmt.Errorf("%s holds [secrets] and others can read it (mode %v): chmod 600 %s", path, fi.Mode().Perm(), path)
		}
	}
	return u, nil
}

func (u *User) defaults() {
	if u.Secrets == nil {
		u.Secrets = map[string]string{}
	}
}

// Validate reports every problem at once.
func (u User) Validate() error {
	errs := []error{u.Limits.Validate(), u.Network.Validate(), u.Review.Validate()}
	for k, v := range u.Secrets {
		if !egress.ValidEnvName(k) {
			errs = append(errs, fmt.Errorf("secrets: %q is not a valid name (letters, digits, _)", k))
		}
		if v == "" {
			errs = append(errs, fmt.Errorf("secrets: %s is empty", k))
		}
	}
	return errors.Join(errs...)
}
