package envspec

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/airlock-dev/airlock/app/egress"
)

var (
	// aptPackage is Debian's package name grammar (lower-case letters,
	// digits, + - ., at least two characters, the first a letter or a
	// digit), optionally pinned to a version (=[epoch:]version, starting
	// with a digit).
	aptPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(=[0-9][A-Za-z0-9.+~:-]*)?$`)
	// envName is a shell variable name.
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// userName is a POSIX user name from the portable file name
	// characters, not starting with '-', at most 32 characters.
	userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._-]{0,31}$`)
)

// checker collects every problem of one description, each naming its
// key, so one error reports them all.
type checker struct{ errs []error }

func (c *checker) failf(key, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
}

func (c *checker) err() error { return errors.Join(c.errs...) }

// text refuses a NUL byte, which no value may hold (it would end a C
// string in the guest and change what runs). It reports whether s is
// fine.
func (c *checker) text(key, s string) bool {
	if strings.IndexByte(s, 0) >= 0 {
		c.failf(key, "%q holds a NUL byte", s)
		return false
	}
	return true
}

func (c *checker) image(key, s string) {
	switch {
	case !c.text(key, s):
	case s == "":
		c.failf(key, "empty; want an OCI image reference such as \"debian:bookworm-slim\"")
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		c.failf(key, "%q holds white space or a control character; want an OCI image reference such as \"debian:bookworm-slim\"", s)
	case strings.HasPrefix(s, "-"):
		c.failf(key, "%q starts with '-'; want an OCI image reference such as \"debian:bookworm-slim\"", s)
	}
}

func (c *checker) apt(key string, pkgs []string) {
	for i, p := range pkgs {
		k := fmt.Sprintf("%s[%d]", key, i)
		if c.text(k, p) && !aptPackage.MatchString(p) {
			c.failf(k, "%q is not a Debian package name: want lower-case letters, digits, '+', '-' and '.', at least two characters starting with a letter or a digit, optionally =VERSION (\"golang-go\", \"libssl-dev=3.0.15-1~deb12u1\")", p)
		}
	}
}

func (c *checker) env(key string, env map[string]string) {
	for k, v := range env {
		kk := key + "." + k
		if !envName.MatchString(k) {
			c.failf(kk, "%q is not a variable name: want letters, digits and '_', not starting with a digit", k)
			continue
		}
		c.text(kk, v)
	}
}

func (c *checker) user(key, s string) {
	if c.text(key, s) && !userName.MatchString(s) {
		c.failf(key, "%q is not a POSIX user name: want at most 32 letters, digits, '.', '_' or '-', starting with a letter or '_'", s)
	}
}

func (c *checker) hosts(key string, hosts []string) {
	for i, h := range hosts {
		k := fmt.Sprintf("%s[%d]", key, i)
		if !c.text(k, h) {
			continue
		}
		if _, err := egress.ParseRule(h); err != nil {
			c.failf(k, "%w; want a host pattern such as \"proxy.golang.org\", \"*.crates.io\" or \"example.com:8443\"", err)
		}
	}
}

func (c *checker) shell(key, s string) {
	if c.text(key, s) && strings.TrimSpace(s) == "" {
		c.failf(key, "an empty command; remove it or write the command")
	}
}

func (c *checker) argv(key string, argv []string) {
	if len(argv) == 0 {
		c.failf(key, "an empty command; remove it or write the program and its arguments")
		return
	}
	for i, a := range argv {
		c.text(fmt.Sprintf("%s[%d]", key, i), a)
	}
	if strings.TrimSpace(argv[0]) == "" {
		c.failf(key, "the program (first element) is empty")
	}
}

func (c *checker) workspace(key, s string) {
	switch {
	case !c.text(key, s):
	case !path.IsAbs(s) || path.Clean(s) != s:
		c.failf(key, "%q is not a clean absolute path; want one such as \"/workspaces/project\"", s)
	case s == "/":
		c.failf(key, "the project cannot be the guest's root directory; want a folder such as \"/workspaces/project\"")
	}
}
