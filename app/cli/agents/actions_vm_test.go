package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/cli/clitest"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/fakevendor"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// gitHubAPI is a fake api.github.com: it answers a comment with 201 and
// an id, anything else with 200.
type gitHubAPI struct{}

func (gitHubAPI) Hosts() []string { return []string{"api.github.com"} }

func (gitHubAPI) Serve(_ *fakevendor.Server, w http.ResponseWriter, r *http.Request, _ []byte) int {
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintln(w, `{"id": 4242, "html_url": "https://github.com/org/repo/issues/12#issuecomment-4242"}`)
		return http.StatusCreated
	}
	fmt.Fprintln(w, `{"login": "octocat"}`)
	return http.StatusOK
}

const stageConfig = `[[network.host]]
host = "api.github.com"
methods = ["GET"]

[[network.secret]]
host = "api.github.com"
header = "Authorization"
env = "GITHUB_TOKEN"

[[network.stage]]
host = "api.github.com"
paths = ["/repos/**"]
reply = { status = 201, body = '{"id": {{id}}, "held": true}' }
`

// TestStagedActionsInVM: an agent in a real VM comments on an issue
// through the API. The upstream sees nothing while the request is held,
// and the agent gets the configured reply; a GET to the same host passes.
// The actions are listed (airlock actions, after the patch of airlock
// diff, which git apply still takes), one is approved and one rejected,
// --dry-run sends nothing, and apply sends the approved one once, exactly
// as recorded, with the real credential; a second apply sends nothing.
// Every step is in the audit log.
func TestStagedActionsInVM(t *testing.T) {
	testenv.SkipIfShort(t)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	if err := os.MkdirAll(filepath.Join(cfg, "airlock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "airlock", "config.toml"), []byte(stageConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	token := "ghp_airlockTest" + clitest.RandomHex(t, 16)
	t.Setenv("GITHUB_TOKEN", token)
	srv := fakevendor.Start(t, fakevendor.Script{}, gitHubAPI{})
	opts := []cli.Option{clitest.UpstreamHook(srv), cli.WithSendNetwork(srv.Dial, srv.RootCAs)}
	h := testenv.VMHome(t)
	project := clitest.NetclientProject(t)
	const comment = `{"body":"Fixed in the sandbox: the parser now accepts empty input."}`
	script := `set -e
./netclient send POST 'https://api.github.com/repos/org/repo/issues/12/comments?via=agent' '` + comment + `' "Authorization: Bearer $GITHUB_TOKEN" 'Content-Type: application/json' 'Cookie: session=abc'
./netclient get https://api.github.com/user "Authorization: Bearer $GITHUB_TOKEN"
./netclient send POST https://api.github.com/repos/org/repo/issues '{"title":"Spam"}' "Authorization: Bearer $GITHUB_TOKEN"
echo done > notes.txt`
	code, out, errOut := clitest.Run(t, h, opts, "run", "--arch", "amd64", "--project", project, "--", "sh", "-c", script)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "status 201\n{\"id\": 1, \"held\": true}") || !strings.Contains(out, "status 201\n{\"id\": 2, \"held\": true}") {
		t.Errorf("the agent did not get the configured replies:\n%s", out)
	}
	if !strings.Contains(out, "2 requests to APIs were held for review, not sent: airlock actions") {
		t.Errorf("the run's summary does not name the held requests:\n%s", out)
	}
	if !strings.Contains(out, "status 200\n{\"login\": \"octocat\"}") {
		t.Errorf("the GET to the staged host did not pass:\n%s", out)
	}
	if !strings.Contains(errOut, "airlock: net: HELD POST api.github.com:443/repos/org/repo/issues/12/comments → 201 (action 1") {
		t.Errorf("no live line for the held request:\n%s", errOut)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].Method != "GET" || reqs[0].Header.Get("Authorization") != "Bearer "+token {
		t.Fatalf("the upstream saw, during the run: %+v", reqs)
	}
	st, err := sandbox.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	list, err := st.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("sandboxes: %v %v", list, err)
	}
	id := list[0].ID

	code, out, errOut = clitest.Run(t, h, opts, "actions", id)
	if code != 0 || !strings.Contains(out, "#1   held      Comment on issue #12 of org/repo: “Fixed in the sandbox: the parser now accepts empty input.”") ||
		!strings.Contains(out, "#2   held      Open an issue in org/repo: “Spam”") {
		t.Fatalf("actions: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = clitest.Run(t, h, opts, "actions", id, "1")
	if code != 0 || !strings.Contains(out, "Authorization: your GITHUB_TOKEN is put here when it is sent") ||
		!strings.Contains(out, "left out as credentials, never sent: Cookie") || strings.Contains(out, "airlock-placeholder-") {
		t.Fatalf("action 1 whole:\n%s", out)
	}
	// The diff ends with the actions, and git apply still takes it.
	code, out, errOut = clitest.Run(t, h, opts, "diff", id)
	if code != 0 || !strings.Contains(out, "# airlock: 2 actions held for review") || !strings.Contains(out, "# #1   held      Comment on issue #12") {
		t.Fatalf("diff: exit %d\n%s\n%s", code, out, errOut)
	}
	check := exec.Command("git", "apply", "--check", "-")
	check.Dir = t.TempDir()
	check.Stdin = strings.NewReader(out)
	if b, err := check.CombinedOutput(); err != nil {
		t.Fatalf("git apply --check of airlock diff: %v\n%s", err, b)
	}

	if code, out, errOut = clitest.Run(t, h, opts, "actions", id, "--approve", "1", "--reject", "2"); code != 0 || !strings.Contains(out, "#1   approved") || !strings.Contains(out, "#2   rejected") {
		t.Fatalf("decide: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = clitest.Run(t, h, opts, "apply", id, "--all", "--dry-run")
	if code != 0 || !strings.Contains(out, "would send   #1 Comment on issue #12") || strings.Contains(out, "#2") || !strings.Contains(out, "cannot unsend") {
		t.Fatalf("dry run:\n%s", out)
	}
	if len(srv.Requests()) != 1 {
		t.Fatal("the dry run sent something")
	}
	code, out, errOut = clitest.Run(t, h, opts, "apply", id, "--all")
	if code != 0 || !strings.Contains(out, "undo cannot unsend them") ||
		!strings.Contains(out, "sent      #1 POST https://api.github.com/repos/org/repo/issues/12/comments?via=agent → 201 Created") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if b, err := os.ReadFile(filepath.Join(project, "notes.txt")); err != nil || string(b) != "done\n" {
		t.Fatalf("the file was not applied: %q %v", b, err)
	}
	reqs = srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the upstream saw %d requests in all, want the GET and one POST: %+v", len(reqs), reqs)
	}
	post := reqs[1]
	if post.Method != "POST" || post.Path != "/repos/org/repo/issues/12/comments" || post.Query != "via=agent" ||
		string(post.Body) != comment || post.Header.Get("Authorization") != "Bearer "+token ||
		post.Header.Get("Content-Type") != "application/json" || post.Header.Get("Cookie") != "" {
		t.Fatalf("the sent request is not the recorded one: %+v", post)
	}
	for k, vs := range post.Header {
		for _, v := range vs {
			if strings.Contains(v, "airlock-placeholder-") {
				t.Fatalf("a placeholder left in %s: %s", k, v)
			}
		}
	}
	// Again: nothing is sent twice.
	if code, out, errOut = clitest.Run(t, h, opts, "apply", id, "--send", "1"); code != 0 || !strings.Contains(errOut, "action 1 was already sent; it is not sent again") {
		t.Fatalf("second apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("a second apply sent again: %d requests", n)
	}
	code, out, _ = clitest.Run(t, h, opts, "--json", "actions", id)
	var views []sandbox.ActionView
	if err := json.Unmarshal([]byte(out), &views); err != nil || code != 0 || len(views) != 2 {
		t.Fatalf("actions --json: %v\n%s", err, out)
	}
	if views[0].State() != "sent" || views[0].Send.Status != 201 || !bytes.Contains(views[0].Send.Body, []byte("4242")) || views[1].State() != "rejected" {
		t.Fatalf("states after apply: %q %+v, %q", views[0].State(), views[0].Send, views[1].State())
	}
	// The audit log joins the held request's egress record to the
	// action's events.
	sb, err := st.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := sb.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, ev := range evs {
		d, _ := ev.Data.(map[string]any)
		switch {
		case ev.Event == "egress" && d["held"] == true:
			seen = append(seen, fmt.Sprintf("egress held %v", d["action"]))
		case strings.HasPrefix(string(ev.Event), "action-"):
			seen = append(seen, fmt.Sprintf("%s %v", ev.Event, d["action"]))
		}
	}
	want := "action-held 1,egress held 1,action-held 2,egress held 2,action-approved 1,action-rejected 2,action-sent 1"
	if got := strings.Join(seen, ","); got != want {
		t.Fatalf("audit events:\n got %s\nwant %s", got, want)
	}
}
