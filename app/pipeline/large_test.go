package pipeline

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// guestWalkTransfer is localTransfer whose manifest is walked as the
// guest walks it: files over the per-file cap left out and named.
type guestWalkTransfer struct{ localTransfer }

func (guestWalkTransfer) Manifest(ctx context.Context, m Machine, dir string, _ transfer.Known, limits manifest.Limits, excludes []string) (transfer.Known, error) {
	gm, report, err := manifest.Walk(ctx, m.(*localMachine).rewrite(dir), manifest.WalkOptions{Excludes: excludes, MaxFileSize: limits.FileSizeCap()})
	if err != nil {
		return transfer.Known{}, err
	}
	return transfer.Known{Manifest: gm, Skipped: manifest.Noteworthy(report.Excluded)}, nil
}

// bigScript grows a baseline file past the cap, makes a new one over it,
// and edits another file.
const bigScript = `set -e
head -c 200 /dev/zero > big.bin
head -c 300 /dev/zero > new.bin
echo "second line" >> a.txt
`

// The attack of issue 19, item 6: one file over the per-file cap sinks
// nothing. It is left out and named with its size and the cap (progress,
// audit), the edit is collected, the baseline's big.bin is not shown as
// deleted and new.bin is not there at all; in copy and virtiofs modes.
func TestRunLeavesOutLargeFiles(t *testing.T) {
	for _, mode := range []sandbox.SyncMode{sandbox.SyncCopy, sandbox.SyncVirtiofs} {
		t.Run(string(mode), func(t *testing.T) {
			s := newStore(t)
			project := newProject(t)
			writeTree(t, project, map[string]string{"big.bin": "small\n"})
			m := &localMachine{root: t.TempDir()}
			var events []Progress
			var out bytes.Buffer
			var tr Transfer = guestWalkTransfer{}
			res, err := runOnce(context.Background(), s, RunOptions{
				RunSpec: RunSpec{
					Project:    project,
					Script:     []byte(bigScript),
					ScriptName: "agent.sh",
					Image:      "minimal",
					Arch:       "amd64",
					Sync:       mode,
					Limits:     manifest.Limits{MaxFileSize: 100},
				},
				Hooks: Hooks{
					Boot: func(_ context.Context, a Attach) (Machine, error) {
						if len(a.Shares) == 1 {
							m.workspace = a.Shares[0].HostPath
						}
						return m, nil
					},
					Transfer: tr,
					Stdout:   &out,
					Stderr:   &out,
					Progress: func(p Progress) { events = append(events, p) },
				},
			})
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if res.ExitCode != 0 || res.Meta.Status != sandbox.StatusReady {
				t.Errorf("exit %d, status %s", res.ExitCode, res.Meta.Status)
			}
			cs, err := res.Sandbox.Changeset(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, f := range cs.Files {
				paths = append(paths, string(f.Status)+" "+f.Path)
			}
			if got := strings.Join(paths, ", "); got != "modified a.txt" {
				t.Errorf("changeset: %s; want only a.txt modified (big.bin not deleted, new.bin absent)", got)
			}
			var msg string
			for _, e := range events {
				if e.Step == StepCollect && len(e.Excluded) > 0 {
					msg = e.Message
				}
			}
			for _, want := range []string{`"big.bin" (200 B, over the 100 B cap)`, `"new.bin" (300 B, over the 100 B cap)`, "--max-file-size", "max_file_size"} {
				if !strings.Contains(msg, want) {
					t.Errorf("progress %q does not say %q", msg, want)
				}
			}
			evs, err := res.Sandbox.ReadAudit()
			if err != nil {
				t.Fatal(err)
			}
			var skipped string
			for _, e := range evs {
				if e.Event == sandbox.EventSkipped {
					skipped = mustString(e.Data)
				}
			}
			if !strings.Contains(skipped, `"path":"big.bin","reason":"too-large","rule":"200 bytes, over the 100-byte cap","size":200`) {
				t.Errorf("audit skipped event %s", skipped)
			}
		})
	}
}

func TestSkippedMessage(t *testing.T) {
	got := skippedMessage([]manifest.Exclusion{
		{Path: "big.bin", Reason: manifest.ReasonTooLarge, Size: 5 << 30},
		{Path: "p", Reason: manifest.ReasonSpecial, Rule: "p---------"},
	}, 1<<30)
	want := `left out of the changes (2): "big.bin" (5.0 GiB, over the 1.0 GiB cap), "p" (special file p---------); ` +
		`the rest of the changes are kept. To take a larger file, raise the cap: --max-file-size, or max_file_size in the [limits] of your config.toml`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
