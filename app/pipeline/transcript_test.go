package pipeline

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// counter counts what the live output received.
type counter struct{ n atomic.Int64 }

func (c *counter) Write(p []byte) (int, error) { c.n.Add(int64(len(p))); return len(p), nil }

// The attack: the guest's command prints 200 MB to fill the host's disk
// through the transcript. The transcript keeps its first and last bytes
// within the cap, with a marker saying what was left out; the audit log
// says so; the live output still gets everything.
func TestTranscriptIsCapped(t *testing.T) {
	const total = 200_000_000
	s := newStore(t)
	project := newProject(t)
	m := &localMachine{root: t.TempDir()}
	var live counter
	script := `echo FIRST-LINE
yes 'guest output that goes on and on and on' | head -c ` + "200000000" + `
echo
echo LAST-LINE
`
	res, err := runOnce(context.Background(), s, RunOptions{
		RunSpec: RunSpec{
			Project:    project,
			Script:     []byte(script),
			ScriptName: "flood.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       sandbox.SyncCopy,
		},
		Hooks: Hooks{
			Boot:     func(context.Context, Attach) (Machine, error) { return m, nil },
			Transfer: localTransfer{},
			Stdout:   &live,
			Stderr:   &live,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := live.n.Load(); got < total {
		t.Errorf("the live output got %d bytes, want all %d: only the transcript is capped", got, total)
	}
	tr, err := os.ReadFile(res.Sandbox.Path(sandbox.TranscriptFile))
	if err != nil {
		t.Fatal(err)
	}
	const marker = 200 // the marker line is shorter than this
	if len(tr) > TranscriptHead+TranscriptTail+marker {
		t.Errorf("the transcript is %d bytes, over the cap of %d + the marker", len(tr), TranscriptHead+TranscriptTail)
	}
	if !bytes.HasPrefix(tr, []byte("FIRST-LINE\n")) {
		t.Errorf("the transcript does not start with the command's first line: %q", tr[:min(len(tr), 40)])
	}
	if !bytes.HasSuffix(tr, []byte("\nLAST-LINE\n")) {
		t.Errorf("the transcript does not end with the command's last line: %q", tr[max(0, len(tr)-40):])
	}
	i := bytes.Index(tr, []byte("[airlock: "))
	if i < 0 || i > TranscriptHead+1 {
		t.Fatalf("no marker right after the head (at %d)", i)
	}
	line, _, _ := strings.Cut(string(tr[i:]), "\n")
	if !strings.Contains(line, "bytes of output left out here; the transcript keeps the first 32.0 MiB and the last 32.0 MiB]") {
		t.Errorf("marker %q", line)
	}

	evs, err := res.Sandbox.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var capped []sandbox.Event
	for _, e := range evs {
		if e.Event == sandbox.EventCapped {
			capped = append(capped, e)
		}
	}
	if len(capped) != 1 {
		t.Fatalf("%d capped events, want 1", len(capped))
	}
	d := mustString(capped[0].Data)
	t.Logf("transcript: %d bytes; %s", len(tr), d)
	for _, want := range []string{`"log":"transcript.log"`, `"kept_bytes":67108864`} {
		if !strings.Contains(d, want) {
			t.Errorf("capped event %s has no %s", d, want)
		}
	}
}
