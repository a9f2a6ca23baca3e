package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/testkit/testenv"

	"github.com/google/go-cmp/cmp"
)

// reaperHelperEnv makes the test binary act as a subreaper running a
// Reaper (see reaperHelper), so the Reaper's wait4(-1) cannot steal the
// children of other tests.
const reaperHelperEnv = "AIRLOCK_TEST_REAPER_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(reaperHelperEnv) == "1" {
		if err := reaperHelper(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type reaperResult struct {
	Script   string
	Exited   bool
	Status   int
	Signaled bool
	Signal   string
}

// reaperScripts are run concurrently, several times each, while orphans
// die around them.
var reaperScripts = []string{
	"exit 0",
	"exit 3",
	"kill -9 $$",
	"kill -TERM $$",
	"sleep 0.05 & sleep 0.05 & exit 7", // leaves orphans to the reaper
	"(sleep 0.02; exit 9) & wait $!; exit $?",
}

// reaperHelper becomes a subreaper, starts reaperScripts through a Reaper,
// and prints their statuses as JSON, then whether any child (orphans
// included) is left unreaped.
func reaperHelper() error {
	if err := BecomeSubreaper(); err != nil {
		return err
	}
	r := &Reaper{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Run(ctx)

	const rounds = 5
	results := make([]reaperResult, len(reaperScripts)*rounds)
	var wg sync.WaitGroup
	for i := range results {
		script := reaperScripts[i%len(reaperScripts)]
		_, wait, err := r.Start("/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{
			Files: []*os.File{nil, os.Stderr, os.Stderr},
			Sys:   &syscall.SysProcAttr{Setsid: true},
		})
		if err != nil {
			return err
		}
		wg.Go(func() {
			ws := wait()
			res := reaperResult{Script: script, Exited: ws.Exited(), Signaled: ws.Signaled()}
			if ws.Exited() {
				res.Status = ws.ExitStatus()
			}
			if ws.Signaled() {
				res.Signal = ws.Signal().String()
			}
			results[i] = res
		})
	}
	wg.Wait()
	// Every orphan must be reaped too: wait until no child is left.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	r.waitAll(wctx)
	leftover := wctx.Err() != nil
	return json.NewEncoder(os.Stdout).Encode(struct {
		Results  []reaperResult
		Leftover bool
	}{results, leftover})
}

// TestReaper checks that statuses reach their waiters (none stolen by the
// wait4(-1) reaping) and that orphans are reaped, in a child process that
// is a subreaper as PID 1 would be.
func TestReaper(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		testenv.Skip(t, testenv.Unix, "no /bin/sh")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), reaperHelperEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reaper helper: %v", err)
	}
	var got struct {
		Results  []reaperResult
		Leftover bool
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reaper helper output %q: %v", out, err)
	}
	want := map[string]reaperResult{
		"exit 0":        {Exited: true, Status: 0},
		"exit 3":        {Exited: true, Status: 3},
		"kill -9 $$":    {Signaled: true, Signal: syscall.SIGKILL.String()},
		"kill -TERM $$": {Signaled: true, Signal: syscall.SIGTERM.String()},
	}
	for _, res := range got.Results {
		w, ok := want[res.Script]
		if !ok {
			last := res.Script[strings.LastIndex(res.Script, " ")+1:]
			if n, err := strconv.Atoi(last); err == nil {
				w = reaperResult{Exited: true, Status: n}
			} else {
				w = reaperResult{Exited: true, Status: 9} // wait $!; exit $?
			}
		}
		w.Script = res.Script
		if diff := cmp.Diff(w, res); diff != "" {
			t.Errorf("status of %q (-want +got):\n%s", res.Script, diff)
		}
	}
	if got.Leftover {
		t.Error("children were left unreaped")
	}
}
