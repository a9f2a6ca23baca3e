package transfer_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// The host asks for a collect from the overlay's upper layer with the
// layers and the baseline's identity, checks the answer as any other, and
// names the baseline again after a delta, never anything the guest says.
func TestOverlayHost(t *testing.T) {
	id := strings.Repeat("ab", 32)
	base := &manifest.Manifest{Entries: []manifest.Entry{
		{Path: "a.txt", Type: manifest.File, Mode: 0o644, Size: 2, SHA256: strings.Repeat("1", 64)},
		{Path: "b.txt", Type: manifest.File, Mode: 0o644, Size: 2, SHA256: strings.Repeat("2", 64)},
	}}
	since := transfer.Known{ID: id, Manifest: base}
	opts := transfer.Options{AgentPath: "/init", Overlay: transfer.OverlayDirs{Lower: "/mnt/base", Upper: "/mnt/rw/upper"}}
	changedA := `{"path":"a.txt","type":"file","mode":420,"size":3,"sha256":"` + strings.Repeat("3", 64) + `"}`
	for _, tc := range []struct {
		name, out string
		want      error
		wantID    string
	}{
		{"delta", `{"id":"` + id + `","base":"` + id + `","changed":[` + changedA + `],"deleted":["b.txt"]}`, nil, id},
		{"delta-other-id", `{"id":"` + strings.Repeat("c", 32) + `","base":"` + id + `","changed":[` + changedA + `],"deleted":["b.txt"]}`, nil, id},
		{"whole", `{"id":"` + id + `","entries":[` + changedA + `]}`, nil, ""},
		{"other-base", `{"id":"` + id + `","base":"` + strings.Repeat("cd", 32) + `","deleted":["b.txt"]}`, manifest.ErrInvalid, ""},
		{"deleted-unknown", `{"id":"` + id + `","base":"` + id + `","deleted":["c.txt"]}`, manifest.ErrInvalid, ""},
		{"escape", `{"id":"` + id + `","base":"` + id + `","changed":[{"path":"../x","type":"file","mode":420}]}`, manifest.ErrInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var script string
			r := &localRemote{t: t, exec: func(ctx context.Context, s string, _ io.Reader, stdout, _ io.Writer) error {
				script = s
				_, err := io.WriteString(stdout, tc.out)
				return err
			}}
			k, err := transfer.RemoteManifest(t.Context(), r, "/workspace", since, opts)
			want := `'/init' 'manifest' '--max-entries' '500000' '--max-file-size' '1073741824' '--max-total-bytes' '4294967296' '--overlay-lower' '/mnt/base' '--overlay-upper' '/mnt/rw/upper' '--since' '` + id + `' '--' '/workspace'`
			if script != want {
				t.Errorf("command line\n%s\nwant\n%s", script, want)
			}
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != tc.wantID {
				t.Errorf("the host names %q, want %q", k.ID, tc.wantID)
			}
			if len(k.Manifest.Entries) != 1 || k.Manifest.Entries[0].Path != "a.txt" || k.Manifest.Entries[0].Size != 3 {
				t.Errorf("resolved %+v", k.Manifest.Entries)
			}
			if tc.wantID == "" {
				return
			}
			// The next collect's delta is against the baseline again: b.txt
			// is still deleted, and a.txt changed back.
			r.exec = func(ctx context.Context, s string, _ io.Reader, stdout, _ io.Writer) error {
				_, err := io.WriteString(stdout, `{"id":"`+id+`","base":"`+id+`","deleted":["b.txt"]}`)
				return err
			}
			k2, err := transfer.RemoteManifest(t.Context(), r, "/workspace", k, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(k2.Manifest.Entries) != 1 || k2.Manifest.Entries[0] != base.Entries[0] || k2.ID != id {
				t.Errorf("second collect: %q %+v", k2.ID, k2.Manifest.Entries)
			}
		})
	}
}
