// Command testreport is what scripts/test pipes `go test -json` through:
// it prints the tests' human output live as it streams, then a report of
// the slowest tests and the time each package took, and a closing line
// "N passed, N failed, N skipped". It exits non-zero when any test or
// package failed, or a package did not build, so the report comes out when
// it is needed most and the run still fails.
//
// With no arguments it reads standard input. Arguments name several
// streams read at once (files or named pipes, one per `go test` running
// beside the others), each LABEL=PATH or PATH: a label is added to the
// names of that stream's packages ("app/cli (without -race)"), so that the
// same package run two ways is counted twice, apart.
//
// It must not import anything outside the standard library.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	top := flag.Int("top", 25, "how many of the slowest tests to list")
	flag.Parse()
	r := newReport()
	if err := r.readAll(flag.Args(), os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: %v\n", err)
		os.Exit(2)
	}
	r.print(os.Stdout, *top)
	if r.failed() {
		os.Exit(1)
	}
}

// event is one line of `go test -json` (test2json's TestEvent, and the
// build events go test adds: build-output, build-fail).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// timing is one test's or package's result.
type timing struct {
	Package, Test string
	Elapsed       float64
	Action        string // pass, fail, skip
	// Start and End are a package's first and last event times (go
	// test's own), for the timeline; zero for tests.
	Start, End time.Time
}

// report adds up the events of one run.
type report struct {
	mu        sync.Mutex // held while a line of any stream is added
	tests     []timing
	packages  map[string]*timing
	builds    map[string]bool // import paths whose build failed
	nonJSON   int             // lines that were not events (go's own stderr, mixed in)
	order     []string        // packages in the order they started
	running   map[string]bool // tests started and not ended, by package+"\x00"+test
	pkgFailed bool
}

func newReport() *report {
	return &report{
		packages: map[string]*timing{},
		builds:   map[string]bool{},
		running:  map[string]bool{},
	}
}

// readAll reads the streams that args name (see the command's comment),
// or standard input when there are none, all at once, line by line.
func (r *report) readAll(args []string, out io.Writer) error {
	if len(args) == 0 {
		return r.read(os.Stdin, "", out)
	}
	errs := make(chan error, len(args))
	for _, arg := range args {
		label, path, ok := strings.Cut(arg, "=")
		if !ok {
			label, path = "", arg
		}
		go func() {
			f, err := os.Open(path)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			if err := r.read(f, label, out); err != nil {
				errs <- fmt.Errorf("%s: %w", path, err)
				return
			}
			errs <- nil
		}()
	}
	var all []error
	for range args {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// read consumes one event stream, writing each event's output to out as
// it comes; label, when set, is added to the stream's package names. A
// line that is not an event (a build error go writes to stderr, merged
// in) is written as it is. Lines of several streams read at once are
// added one at a time, whole.
func (r *report) read(in io.Reader, label string, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		r.mu.Lock()
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			r.nonJSON++
			fmt.Fprintf(out, "%s\n", line)
		} else {
			if label != "" && e.Package != "" {
				e.Package += " (" + label + ")"
			}
			r.add(e, out)
		}
		r.mu.Unlock()
	}
	return sc.Err()
}

func (r *report) add(e event, out io.Writer) {
	if e.Package != "" && !e.Time.IsZero() {
		p := r.pkg(e.Package)
		if p.Start.IsZero() || e.Time.Before(p.Start) {
			p.Start = e.Time
		}
		if e.Time.After(p.End) {
			p.End = e.Time
		}
	}
	switch e.Action {
	case "output", "build-output":
		io.WriteString(out, e.Output)
		return
	case "build-fail":
		r.builds[e.ImportPath] = true
		return
	case "start":
		r.pkg(e.Package)
		return
	case "run":
		r.running[e.Package+"\x00"+e.Test] = true
		return
	case "pass", "fail", "skip":
	default:
		return
	}
	if e.Test == "" {
		p := r.pkg(e.Package)
		p.Elapsed, p.Action = e.Elapsed, e.Action
		if e.Action == "fail" {
			r.pkgFailed = true
		}
		return
	}
	delete(r.running, e.Package+"\x00"+e.Test)
	r.tests = append(r.tests, timing{Package: e.Package, Test: e.Test, Elapsed: e.Elapsed, Action: e.Action})
}

func (r *report) pkg(name string) *timing {
	p, ok := r.packages[name]
	if !ok {
		p = &timing{Package: name}
		r.packages[name] = p
		r.order = append(r.order, name)
	}
	return p
}

// failed says whether the run failed: a test or package failed, a build
// failed, or a package started and never ended (go test was killed).
func (r *report) failed() bool {
	if r.pkgFailed || len(r.builds) > 0 || len(r.running) > 0 {
		return true
	}
	for _, t := range r.tests {
		if t.Action == "fail" {
			return true
		}
	}
	for _, p := range r.packages {
		if p.Action == "" || p.Action == "fail" {
			return true
		}
	}
	return false
}

// print writes the report: the top slowest tests, every package's time
// (slowest first), what did not build, and the closing count.
func (r *report) print(w io.Writer, top int) {
	tests := append([]timing(nil), r.tests...)
	sort.SliceStable(tests, func(i, j int) bool { return tests[i].Elapsed > tests[j].Elapsed })
	if len(tests) > top {
		tests = tests[:top]
	}
	fmt.Fprintf(w, "\n=== %d slowest tests\n", len(tests))
	for _, t := range tests {
		fmt.Fprintf(w, "%9.2fs  %-4s  %s %s\n", t.Elapsed, t.Action, short(t.Package), t.Test)
	}
	pkgs := make([]*timing, 0, len(r.packages))
	for _, name := range r.order {
		pkgs = append(pkgs, r.packages[name])
	}
	sort.SliceStable(pkgs, func(i, j int) bool { return pkgs[i].Elapsed > pkgs[j].Elapsed })
	fmt.Fprintf(w, "\n=== time per package\n")
	for _, p := range pkgs {
		action := p.Action
		if action == "" {
			action = "fail" // started and never ended: killed, or timed out
		}
		if action == "skip" {
			action = "none" // no test files
		}
		fmt.Fprintf(w, "%9.2fs  %-4s  %s\n", p.Elapsed, action, p.Package)
	}
	r.printTimeline(w, pkgs)
	if len(r.builds) > 0 {
		var names []string
		for n := range r.builds {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "\n=== did not build\n")
		for _, n := range names {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	pass, fail, skip := r.counts()
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", pass, fail, skip)
}

// printTimeline writes when each package that ran tests started and
// ended, from the first start of any, in the order they started: with
// several go test runs side by side, the critical path shows (which
// stream ended last, and what it waited on), not only each package's
// total.
func (r *report) printTimeline(w io.Writer, pkgs []*timing) {
	var ran []*timing
	var first time.Time
	for _, p := range pkgs {
		if p.Action == "skip" || p.Start.IsZero() {
			continue
		}
		ran = append(ran, p)
		if first.IsZero() || p.Start.Before(first) {
			first = p.Start
		}
	}
	if len(ran) == 0 {
		return
	}
	sort.SliceStable(ran, func(i, j int) bool { return ran[i].Start.Before(ran[j].Start) })
	fmt.Fprintf(w, "\n=== when each package ran (from the first start)\n")
	for _, p := range ran {
		fmt.Fprintf(w, "  +%s  to +%s  %s\n", clock(p.Start.Sub(first)), clock(p.End.Sub(first)), p.Package)
	}
}

// clock is d as minutes and seconds, 03:07.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}

// counts are the closing line's numbers: tests passed, failed and skipped;
// a package that failed with no failed test (a build failure, a panic in
// TestMain, a timeout) counts as one failure, and so does a test left
// running when the stream ended.
func (r *report) counts() (pass, fail, skip int) {
	failedIn := map[string]bool{}
	for _, t := range r.tests {
		switch t.Action {
		case "pass":
			pass++
		case "fail":
			fail++
			failedIn[t.Package] = true
		case "skip":
			skip++
		}
	}
	fail += len(r.running)
	for k := range r.running {
		failedIn[strings.SplitN(k, "\x00", 2)[0]] = true
	}
	for name, p := range r.packages {
		if (p.Action == "fail" || p.Action == "") && !failedIn[name] {
			fail++
		}
	}
	return pass, fail, skip
}

// short drops the module path common to Airlock's packages.
func short(pkg string) string {
	if i := strings.Index(pkg, "/airlock/"); i >= 0 {
		return pkg[i+len("/airlock/"):]
	}
	return pkg
}
