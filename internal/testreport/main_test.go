package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// testdata/mixed.json is a recorded `go test -json ./...` of three
// packages: ok (two passes, a subtest, a skip), bad (one pass, one fail)
// and broken (a test file that does not compile).
func readRecorded(t *testing.T, name string) (*report, string) {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := newReport()
	var out bytes.Buffer
	if err := r.read(f, "", &out); err != nil {
		t.Fatal(err)
	}
	r.print(&out, 25)
	return r, out.String()
}

func TestReportMixed(t *testing.T) {
	r, out := readRecorded(t, "mixed.json")
	if !r.failed() {
		t.Error("failed() = false for a run with a failed test and a failed build")
	}
	for _, want := range []string{
		"--- FAIL: TestFail",               // the live output, streamed
		"broken/b_test.go:3:28: undefined", // the build's own output
		"=== did not build\n  example.com/trs/broken [example.com/trs/broken.test]\n",
		"fail  example.com/trs/broken\n",       // the package shows as a failure
		"fail  example.com/trs/bad TestFail\n", // in the slowest list
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// 4 passes (TestPass, TestA, TestB, TestB/sub); TestFail, plus the
	// package that did not build; TestSkip.
	last := lastLine(out)
	if last != "4 passed, 2 failed, 1 skipped" {
		t.Errorf("closing line = %q", last)
	}
}

func TestReportAllPass(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestSlow"}
{"Action":"output","Package":"p","Test":"TestSlow","Output":"=== RUN   TestSlow\n"}
{"Action":"pass","Package":"p","Test":"TestSlow","Elapsed":12.5}
{"Action":"run","Package":"p","Test":"TestQuick"}
{"Action":"pass","Package":"p","Test":"TestQuick","Elapsed":0.25}
{"Action":"pass","Package":"p","Elapsed":12.9}
{"Action":"start","Package":"q"}
{"Action":"output","Package":"q","Output":"?   \tq\t[no test files]\n"}
{"Action":"skip","Package":"q","Elapsed":0}
`
	r := newReport()
	var out bytes.Buffer
	if err := r.read(strings.NewReader(in), "", &out); err != nil {
		t.Fatal(err)
	}
	r.print(&out, 1)
	if r.failed() {
		t.Error("failed() = true for a run that passed")
	}
	s := out.String()
	for _, want := range []string{
		"=== RUN   TestSlow\n",
		"=== 1 slowest tests\n    12.50s  pass  p TestSlow\n",
		"    12.90s  pass  p\n",
		"     0.00s  none  q\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "TestQuick") {
		t.Errorf("-top 1 listed a second test:\n%s", s)
	}
	if last := lastLine(s); last != "2 passed, 0 failed, 0 skipped" {
		t.Errorf("closing line = %q", last)
	}
}

// A stream that stops mid-test (go test killed, or its timeout's panic
// cut short) fails, and the test left running counts as failed.
func TestReportCutShort(t *testing.T) {
	in := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestHangs"}
not json: go's own stderr, passed through
`
	r := newReport()
	var out bytes.Buffer
	if err := r.read(strings.NewReader(in), "", &out); err != nil {
		t.Fatal(err)
	}
	r.print(&out, 25)
	if !r.failed() {
		t.Error("failed() = false for a stream cut short")
	}
	s := out.String()
	if !strings.Contains(s, "not json: go's own stderr, passed through\n") {
		t.Errorf("a non-JSON line was not passed through:\n%s", s)
	}
	if last := lastLine(s); last != "0 passed, 1 failed, 0 skipped" {
		t.Errorf("closing line = %q", last)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// Two streams read at once, one of them labelled: the same package run
// both ways is counted twice, apart, and a failure in either fails the run.
func TestReportSeveralStreams(t *testing.T) {
	dir := t.TempDir()
	race := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestUnit"}
{"Action":"pass","Package":"p","Test":"TestUnit","Elapsed":0.5}
{"Action":"pass","Package":"p","Elapsed":1}
`
	vm := `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestUnit"}
{"Action":"pass","Package":"p","Test":"TestUnit","Elapsed":0.25}
{"Action":"run","Package":"p","Test":"TestVM"}
{"Action":"output","Package":"p","Test":"TestVM","Output":"--- FAIL: TestVM\n"}
{"Action":"fail","Package":"p","Test":"TestVM","Elapsed":30}
{"Action":"fail","Package":"p","Elapsed":31}
`
	for name, s := range map[string]string{"race.json": race, "vm.json": vm} {
		if err := os.WriteFile(dir+"/"+name, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := newReport()
	var out bytes.Buffer
	if err := r.readAll([]string{dir + "/race.json", "without -race=" + dir + "/vm.json"}, &out); err != nil {
		t.Fatal(err)
	}
	r.print(&out, 25)
	if !r.failed() {
		t.Error("failed() = false with a failed test in the second stream")
	}
	for _, want := range []string{
		"--- FAIL: TestVM",
		"pass  p\n",
		"fail  p (without -race)\n",
		"fail  p (without -race) TestVM\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if last := lastLine(out.String()); last != "2 passed, 1 failed, 0 skipped" {
		t.Errorf("closing line = %q", last)
	}
	if err := newReport().readAll([]string{dir + "/missing.json"}, &out); err == nil {
		t.Error("readAll of a missing stream: no error")
	}
}

// The timeline puts packages of streams run side by side in the order
// they started, each with its start and end from the first start.
func TestReportTimeline(t *testing.T) {
	in := `{"Time":"2026-01-01T10:00:05Z","Action":"start","Package":"late"}
{"Time":"2026-01-01T10:00:00Z","Action":"start","Package":"early"}
{"Time":"2026-01-01T10:00:01Z","Action":"run","Package":"early","Test":"TestA"}
{"Time":"2026-01-01T10:02:07Z","Action":"pass","Package":"early","Test":"TestA","Elapsed":126}
{"Time":"2026-01-01T10:02:08Z","Action":"pass","Package":"early","Elapsed":128}
{"Time":"2026-01-01T10:00:05Z","Action":"skip","Package":"notests","Elapsed":0}
{"Time":"2026-01-01T10:00:06Z","Action":"run","Package":"late","Test":"TestB"}
{"Time":"2026-01-01T11:01:06Z","Action":"pass","Package":"late","Test":"TestB","Elapsed":3660}
{"Time":"2026-01-01T11:01:06Z","Action":"pass","Package":"late","Elapsed":3661}
`
	r := newReport()
	var out bytes.Buffer
	if err := r.read(strings.NewReader(in), "", &out); err != nil {
		t.Fatal(err)
	}
	r.print(&out, 25)
	want := "\n=== when each package ran (from the first start)\n" +
		"  +00:00  to +02:08  early\n" +
		"  +00:05  to +61:06  late\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("report lacks the timeline %q:\n%s", want, out.String())
	}
	if strings.Contains(out.String(), "notests\n  ") || strings.Count(out.String(), "notests") != 1 {
		t.Errorf("a package without tests is in the timeline:\n%s", out.String())
	}
}
