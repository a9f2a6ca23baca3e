package pipeline

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// psMachine answers `docker compose ps` with out, whatever else it runs.
type psMachine struct {
	Machine
	out string
}

func (m psMachine) Exec(_ context.Context, script string, _ io.Reader, stdout, _ io.Writer) error {
	if strings.Contains(script, " ps -a --format json") {
		io.WriteString(stdout, m.out)
	}
	return nil
}

func TestServicesState(t *testing.T) {
	// Compose 2.21 and later: one object a line; before: an array. The
	// guest's output is data: a line that is not JSON is skipped.
	lines := `{"Service":"web","State":"running","Health":"healthy","ExitCode":0}
not json
{"Service":"test","State":"exited","Health":"","ExitCode":0}
{"Service":"db","State":"exited","Health":"","ExitCode":3}
{"Service":"slow","State":"running","Health":"starting","ExitCode":0}
`
	array := `[{"Service":"web","State":"running","Health":"healthy","ExitCode":0},{"Service":"test","State":"exited","ExitCode":0},
{"Service":"db","State":"exited","ExitCode":3},{"Service":"slow","State":"running","Health":"starting"}]`
	for name, out := range map[string]string{"lines": lines, "array": array} {
		t.Run(name, func(t *testing.T) {
			ps, err := servicesState(context.Background(), psMachine{out: out}, "docker compose")
			if err != nil {
				t.Fatal(err)
			}
			states, pending, failed := readiness([]string{"db", "gone", "slow", "test", "web"}, ps)
			want := map[string]string{"web": "running (healthy)", "test": "completed", "db": "exited, status 3",
				"slow": "running (starting)", "gone": "not created"}
			if diff := cmp.Diff(want, states); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if pending != "gone" || failed != "db" {
				t.Errorf("pending %q, failed %q; want gone, db", pending, failed)
			}
		})
	}
	_, pending, failed := readiness([]string{"web", "test"}, map[string]serviceState{
		"web": {Service: "web", State: "running"}, "test": {Service: "test", State: "exited"}})
	if pending != "" || failed != "" {
		t.Errorf("a running service without a healthcheck and a completed one: pending %q, failed %q", pending, failed)
	}
	if _, _, failed := readiness([]string{"db"}, map[string]serviceState{"db": {State: "running", Health: "unhealthy"}}); failed != "db" {
		t.Errorf("an unhealthy service is not a failure")
	}
}

func TestBypassProxy(t *testing.T) {
	r := &runner{netEnv: map[string]string{"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1", "HTTP_PROXY": "http://127.0.0.1:3128"}}
	before := r.netEnv
	r.bypassProxy([]string{"web", "db"})
	if got := r.netEnv["NO_PROXY"]; got != "localhost,127.0.0.1,web,db" || r.netEnv["no_proxy"] != got {
		t.Errorf("NO_PROXY = %q", got)
	}
	if before["NO_PROXY"] != "localhost,127.0.0.1" {
		t.Error("the network's own variables were changed in place")
	}
	// The run's network sets only the proxy; NO_PROXY is the guest's.
	r = &runner{netEnv: map[string]string{"HTTP_PROXY": "http://127.0.0.1:3128"}}
	r.bypassProxy([]string{"web"})
	if got := r.netEnv["NO_PROXY"]; got != "localhost,127.0.0.1,web" || r.netEnv["no_proxy"] != got {
		t.Errorf("NO_PROXY without the network's own = %q", got)
	}
}

func TestTail(t *testing.T) {
	tl := &tail{max: 5}
	io.WriteString(tl, "abc")
	io.WriteString(tl, "defgh")
	if tl.String() != "defgh" {
		t.Errorf("tail = %q", tl.String())
	}
}
