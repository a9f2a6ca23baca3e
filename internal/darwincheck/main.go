// Command darwincheck type-checks the module's macOS code on any host.
//
// vm/vz uses Virtualization.framework through github.com/Code-Hex/vz, which
// is cgo and Objective-C: it builds only on a Mac with the SDK, so neither
// `go build` nor `go vet` can look at it here. darwincheck asks `go list`
// which files a darwin build would compile (GOOS=darwin, CGO_ENABLED=1; no
// C compiler runs), then type-checks every package with go/types, faking
// cgo's import "C". Errors in dependencies (the standard library, vz's own
// C-backed code) are dropped; errors in this module's packages are printed
// as file:line:col and the exit status is 1.
//
// Usage:
//
//	go run ./internal/darwincheck [-goarch arm64,amd64] [-test] [-tags t] [-v] [packages]
//
// It checks each listed architecture in turn: both by default, because
// some vz APIs (save and restore, Rosetta) exist on arm64 only. It must not
// import anything outside the standard library.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("darwincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	goos := fs.String("goos", "darwin", "target `GOOS`")
	goarch := fs.String("goarch", "arm64,amd64", "comma-separated target `GOARCH`es")
	tags := fs.String("tags", "", "comma-separated build `tags`")
	test := fs.Bool("test", false, "also check _test.go files")
	verbose := fs.Bool("v", false, "report how many dependency errors were ignored")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	patterns := fs.Args()
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	status := 0
	for _, arch := range strings.Split(*goarch, ",") {
		r, err := check(Options{GOOS: *goos, GOARCH: arch, Tags: *tags, Tests: *test, Patterns: patterns})
		if err != nil {
			fmt.Fprintf(stderr, "darwincheck: %s/%s: %v\n", *goos, arch, err)
			return 2
		}
		for _, e := range r.Errors {
			fmt.Fprintln(stderr, e)
		}
		if *verbose {
			fmt.Fprintf(stderr, "darwincheck: %s/%s: %d packages, %d errors in dependencies ignored\n", *goos, arch, r.Packages, r.Ignored)
		}
		if r.Checked == 0 {
			fmt.Fprintf(stderr, "darwincheck: %s/%s: no package of this module matched %s\n", *goos, arch, strings.Join(patterns, " "))
			return 2
		}
		if len(r.Errors) > 0 {
			fmt.Fprintf(stderr, "darwincheck: %d errors (%s/%s, cgo faked)\n", len(r.Errors), *goos, arch)
			status = 1
			continue
		}
		fmt.Fprintf(stdout, "darwincheck: ok (%s/%s, %d of our packages, cgo faked)\n", *goos, arch, r.Checked)
	}
	return status
}
