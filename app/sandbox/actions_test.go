package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/review"
)

func heldPost(path, body string) egress.Held {
	return egress.Held{Time: time.Now(), Scheme: "https", Host: "api.github.com", Port: 443, Method: "POST", Path: path,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body), Rule: "api.github.com (POST)"}
}

func TestHoldActionNumbersConcurrently(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "act1")
	var wg sync.WaitGroup
	ids := make([]int, 20)
	for i := range ids {
		wg.Go(func() {
			id, err := sb.HoldAction(heldPost(fmt.Sprintf("/repos/o/r/issues/%d/comments", i), `{"body":"x"}`), 1)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		})
	}
	wg.Wait()
	got := slices.Sorted(slices.Values(ids))
	for i, id := range got {
		if id != i+1 {
			t.Fatalf("ids %v: want 1 to 20, each once", got)
		}
	}
	as, err := sb.Actions()
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 20 || as[0].ID != 1 || as[19].ID != 20 {
		t.Fatalf("Actions: %d, first %d", len(as), as[0].ID)
	}
	fi, err := os.Stat(sb.Path(filepath.Join(ActionsDir, "0001.json")))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("action file: %v %v", fi.Mode(), err)
	}
	evs, err := sb.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, ev := range evs {
		if ev.Event == EventActionHeld {
			held++
			data := ev.Data.(map[string]any)
			if _, ok := data["body"]; ok {
				t.Fatalf("the audit log keeps the body: %v", data)
			}
		}
	}
	if held != 20 {
		t.Fatalf("%d action-held events, want 20", held)
	}
}

func TestActionFileTamperedIsRefused(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "act2")
	if _, err := sb.HoldAction(heldPost("/x", "{}"), 1); err != nil {
		t.Fatal(err)
	}
	p := sb.Path(filepath.Join(ActionsDir, "0001.json"))
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(data, []byte(`"id": 1`), []byte(`"id": 7`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Actions(); err == nil || !strings.Contains(err.Error(), "says it is action 7") {
		t.Fatalf("Actions of a renumbered file: %v", err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", p); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Actions(); err == nil || !strings.Contains(err.Error(), "not a held request") {
		t.Fatalf("Actions through a link: %v", err)
	}
}

// upstream counts what each path received.
type upstream struct {
	mu   sync.Mutex
	got  map[string]int
	fail map[string]int // path → status to answer
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.got[r.URL.Path]++
	st := u.fail[r.URL.Path]
	u.mu.Unlock()
	if st != 0 {
		w.WriteHeader(st)
		io.WriteString(w, "refused")
		return
	}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id": 1}`)
}

func (u *upstream) count(p string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got[p]
}

// plainSend sends an action to srv as plain HTTP (the journal is what is
// tested here, not the transport).
func plainSend(srv string) SendFunc {
	return func(ctx context.Context, a Action) (egress.Sent, error) {
		req, err := http.NewRequestWithContext(ctx, a.Method, srv+a.Path, bytes.NewReader(a.Body))
		if err != nil {
			return egress.Sent{}, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return egress.Sent{}, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return egress.Sent{Status: resp.StatusCode, Body: body, Wrote: true}, nil
	}
}

func holdN(t *testing.T, sb *Sandbox, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		if _, err := sb.HoldAction(heldPost("/a"+strconv.Itoa(i), fmt.Sprintf(`{"body":"%d"}`, i)), 1); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSendActionsOnceInOrder(t *testing.T) {
	u := &upstream{got: map[string]int{}}
	srv := httptest.NewServer(u)
	defer srv.Close()
	s := newStore(t)
	sb := mkSandbox(t, s, "act3")
	holdN(t, sb, 4)
	var order []int
	res, err := sb.SendActions(context.Background(), []int{3, 1, 3}, plainSend(srv.URL), func(r ActionResult) { order = append(order, r.ID) })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []int{1, 3}) || len(res) != 2 || res[0].Status != 201 {
		t.Fatalf("sent %v: %+v", order, res)
	}
	// Again, with one more: only the new one leaves.
	res, err = sb.SendActions(context.Background(), []int{1, 3, 4}, plainSend(srv.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Already || !res[1].Already || res[2].Already || res[2].State != Sent {
		t.Fatalf("second apply: %+v", res)
	}
	for p, want := range map[string]int{"/a1": 1, "/a2": 0, "/a3": 1, "/a4": 1} {
		if got := u.count(p); got != want {
			t.Errorf("%s received %d times, want %d", p, got, want)
		}
	}
	j, err := sb.SendJournal()
	if err != nil {
		t.Fatal(err)
	}
	if j[1].State != Sent || j[1].Status != 201 || string(j[1].Body) != `{"id": 1}` {
		t.Fatalf("journal: %+v", j[1])
	}
	evs, _ := sb.ReadAudit()
	sent := 0
	for _, ev := range evs {
		if ev.Event == EventActionSent {
			sent++
			if ev.Data.(map[string]any)["status"] != float64(201) {
				t.Fatalf("action-sent event: %v", ev.Data)
			}
		}
	}
	if sent != 3 {
		t.Fatalf("%d action-sent events, want 3", sent)
	}
}

func TestSendActionsStopsAtFailure(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "act4")
	holdN(t, sb, 3)
	calls := 0
	// Action 2's request never leaves (a dial error): it stays unsent,
	// 3 is not overtaken, and the next apply sends both.
	failing := func(ctx context.Context, a Action) (egress.Sent, error) {
		calls++
		if a.ID == 2 {
			return egress.Sent{}, errors.New("dial tcp: connection refused")
		}
		return egress.Sent{Status: 200, Wrote: true}, nil
	}
	res, err := sb.SendActions(context.Background(), []int{1, 2, 3}, failing, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[1].State != NotSent || res[1].Error == "" || calls != 2 {
		t.Fatalf("results %+v after %d calls", res, calls)
	}
	ok := func(ctx context.Context, a Action) (egress.Sent, error) {
		calls++
		return egress.Sent{Status: 200, Wrote: true}, nil
	}
	res, err = sb.SendActions(context.Background(), []int{1, 2, 3}, ok, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Already || res[1].Already || res[1].State != Sent || res[2].State != Sent || calls != 4 {
		t.Fatalf("retry: %+v after %d calls", res, calls)
	}
	// A request that may have arrived (written, no answer) is never
	// sent again.
	holdN(t, sb, 1)
	cut := func(ctx context.Context, a Action) (egress.Sent, error) {
		calls++
		return egress.Sent{Wrote: true}, errors.New("connection reset by peer")
	}
	if res, err = sb.SendActions(context.Background(), []int{4}, cut, nil); err != nil || res[0].State != Sending {
		t.Fatalf("cut: %+v %v", res, err)
	}
	if res, err = sb.SendActions(context.Background(), []int{4}, ok, nil); err != nil || !res[0].Already || res[0].State != Sending || calls != 5 {
		t.Fatalf("after cut: %+v %v (%d calls)", res, err, calls)
	}
	views, err := sb.ActionViews(review.Decisions{Actions: map[int]review.Verdict{4: review.Approve}})
	if err != nil || views[3].State() != "may have been sent" {
		t.Fatalf("state of a cut action: %q %v", views[3].State(), err)
	}
}

func TestSendActionsRefusesRunningSandbox(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "act5")
	holdN(t, sb, 1)
	if _, err := sb.Update(func(m *Meta) { m.Status = StatusRunning }); err != nil {
		t.Fatal(err)
	}
	_, err := sb.SendActions(context.Background(), []int{1}, plainSend("http://127.0.0.1:1"), nil)
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("send while running: %v", err)
	}
}

func TestVerdictsOnActionsAreAudited(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "act6")
	holdN(t, sb, 2)
	d := review.Decisions{Actions: map[int]review.Verdict{1: review.Approve, 2: review.Reject}}
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}
	// Saving the same again records nothing new; taking 2 back does.
	if err := sb.SaveDecisions(d); err != nil {
		t.Fatal(err)
	}
	if err := sb.SaveDecisions(review.Decisions{Actions: map[int]review.Verdict{1: review.Approve}}); err != nil {
		t.Fatal(err)
	}
	evs, _ := sb.ReadAudit()
	var kinds []string
	for _, ev := range evs {
		if strings.HasPrefix(string(ev.Event), "action-") && ev.Event != EventActionHeld {
			kinds = append(kinds, fmt.Sprintf("%s %v", ev.Event, ev.Data.(map[string]any)["action"]))
		}
	}
	want := []string{"action-approved 1", "action-rejected 2", "action-undecided 2"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	got, err := sb.Decisions(context.Background())
	if err != nil || got.Actions[1] != review.Approve || len(got.Actions) != 1 {
		t.Fatalf("saved: %+v %v", got.Actions, err)
	}
}

// TestSendActionsResumesAfterKill kills a process that is sending
// actions right after the first was answered and journalled, and checks
// that the next apply sends the rest, each action exactly once.
func TestSendActionsResumesAfterKill(t *testing.T) {
	if dir := os.Getenv("AIRLOCK_TEST_SEND_CHILD"); dir != "" {
		sendChild(dir, os.Getenv("AIRLOCK_TEST_SEND_URL"))
		return
	}
	u := &upstream{got: map[string]int{}}
	srv := httptest.NewServer(u)
	defer srv.Close()
	s := newStore(t)
	sb := mkSandbox(t, s, "act7")
	holdN(t, sb, 3)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSendActionsResumesAfterKill$")
	cmd.Env = append(os.Environ(), "AIRLOCK_TEST_SEND_CHILD="+s.home.Root, "AIRLOCK_TEST_SEND_URL="+srv.URL)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was to be killed: %v\n%s", err, out)
	}
	if u.count("/a1") != 1 || u.count("/a2") != 0 {
		t.Fatalf("before the resume: a1 %d, a2 %d", u.count("/a1"), u.count("/a2"))
	}
	res, err := sb.SendActions(context.Background(), []int{1, 2, 3}, plainSend(srv.URL), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Already || res[1].Already || res[2].Already {
		t.Fatalf("resume: %+v", res)
	}
	for _, p := range []string{"/a1", "/a2", "/a3"} {
		if got := u.count(p); got != 1 {
			t.Errorf("%s received %d times, want exactly once", p, got)
		}
	}
}

// sendChild sends the actions of the one sandbox in the store at dir and
// kills itself as soon as the first is journalled as sent.
func sendChild(dir, url string) {
	s, err := Open(dir)
	if err != nil {
		panic(err)
	}
	sb := &Sandbox{ID: "act7", Dir: s.home.Sandbox("act7"), store: s}
	_, err = sb.SendActions(context.Background(), []int{1, 2, 3}, plainSend(url), func(r ActionResult) {
		if r.ID == 1 {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
	})
	panic(fmt.Sprintf("the child was not killed: %v", err))
}

func TestHoldActionCapped(t *testing.T) {
	s := newStore(t)
	sb := mkSandbox(t, s, "act8")
	dir := sb.Path(ActionsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= MaxActions; i++ {
		if err := os.WriteFile(filepath.Join(dir, actionFile(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sb.HoldAction(heldPost("/x", "{}"), 1); err == nil || !strings.Contains(err.Error(), "the most it keeps") {
		t.Fatalf("hold beyond the cap: %v", err)
	}
}
