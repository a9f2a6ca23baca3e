package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

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
	if err := decodeStrict(data, &u, "open_network, [limits] "+limitKeys()+", [network], [secrets]"); err != nil {
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
	errs := []error{u.Limits.Validate(), u.Network.Validate()}
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
