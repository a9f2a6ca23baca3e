package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
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
//	merge_tool = "code --wait --merge $MINE $THEIRS $BASE $OUTPUT"
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
	// MCP is what airlock mcp's clients may open.
	MCP MCP `toml:"mcp"`
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
	// MergeTool is the command line of the program that resolves a file
	// in conflict at apply ("Merge tool…" in the app), split into words
	// as a shell would (quotes, backslashes) but run without a shell. In
	// its words $MINE, $THEIRS, $BASE and $OUTPUT stand for temporary
	// files on the host holding the project's version, the approved
	// change, the snapshot's version and the result (filled in with the
	// conflict markers first); the tool saves the result in $OUTPUT.
	// Empty: no merge tool.
	MergeTool string `toml:"merge_tool"`
}

// MergeToolPlaceholders are the words [review] merge_tool may use.
var MergeToolPlaceholders = []string{"$MINE", "$THEIRS", "$BASE", "$OUTPUT"}

// Validate reports every unusable pattern and a merge tool that cannot
// be run.
func (r Review) Validate() error {
	var errs []error
	for i, p := range r.HostExec {
		if err := validPathPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("review.host_exec %d: %w", i+1, err))
		}
	}
	if r.MergeTool != "" {
		if _, err := r.MergeToolArgv(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// MergeToolArgv splits MergeTool into its words, placeholders left in
// them; nil when there is no merge tool. It refuses a command line that
// does not name $OUTPUT (its result could not be read), or that names a
// placeholder Airlock does not fill in.
func (r Review) MergeToolArgv() ([]string, error) {
	if strings.TrimSpace(r.MergeTool) == "" {
		return nil, nil
	}
	argv, err := splitWords(r.MergeTool)
	if err != nil {
		return nil, fmt.Errorf("review.merge_tool %q: %w", r.MergeTool, err)
	}
	output := false
	for _, w := range argv {
		for i := strings.IndexByte(w, '$'); i >= 0; i = strings.IndexByte(w, '$') {
			w = w[i:]
			n := 1
			for n < len(w) && (w[n] == '_' || w[n] >= 'A' && w[n] <= 'Z') {
				n++
			}
			if !slices.Contains(MergeToolPlaceholders, w[:n]) {
				return nil, fmt.Errorf("review.merge_tool %q: %q is not one of %s (no other variable is expanded)", r.MergeTool, w[:n], strings.Join(MergeToolPlaceholders, ", "))
			}
			output = output || w[:n] == "$OUTPUT"
			w = w[n:]
		}
	}
	if !output {
		return nil, fmt.Errorf("review.merge_tool %q: name $OUTPUT, the file where the tool saves the result, e.g. \"code --wait --merge $MINE $THEIRS $BASE $OUTPUT\"", r.MergeTool)
	}
	if strings.HasPrefix(argv[0], "$") {
		return nil, fmt.Errorf("review.merge_tool %q: the first word is the program to run", r.MergeTool)
	}
	return argv, nil
}

// splitWords splits a command line into words as a POSIX shell does for
// quoting: 'single quotes' keep everything, "double quotes" and a
// backslash outside quotes escape one character. Nothing is expanded.
func splitWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	in := false // inside a word
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				w.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0:
				i++
				w.WriteByte(s[i])
			default:
				w.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("it ends with a backslash")
			}
			i++
			w.WriteByte(s[i])
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("a %c quote is not closed", quote)
	}
	if in {
		words = append(words, w.String())
	}
	return words, nil
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
	if err := decodeStrict(data, &u, "open_network, [limits] "+limitKeys()+", [network], [secrets], [review] host_exec, merge_tool, [mcp] projects"); err != nil {
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
	errs := []error{u.Limits.Validate(), u.Network.Validate(), u.Review.Validate(), u.MCP.Validate()}
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
