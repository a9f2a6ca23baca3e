package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr string
	}{
		{in: "2G", want: 2 * GiB},
		{in: "2GiB", want: 2 * GiB},
		{in: "2gb", want: 2 * GiB},
		{in: "512M", want: 512 * MiB},
		{in: "512m", want: 512 * MiB},
		{in: "1.5G", want: 3 * GiB / 2},
		{in: "64K", want: 64 * KiB},
		{in: "1T", want: TiB},
		{in: "4096", want: 4096},
		{in: " 8G ", want: 8 * GiB},
		{in: "none", want: Unlimited},
		{in: "G", wantErr: "want a number"},
		{in: "2X", wantErr: "unknown unit"},
		{in: "-2G", wantErr: "size \"-2G\""},
		{in: "", wantErr: "want a number"},
		{in: "99999999T", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSize(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseSize(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	for s, want := range map[Size]string{2 * GiB: "2G", 512 * MiB: "512M", 1536 * MiB: "1536M", 100: "100", Unlimited: "none", 0: "0"} {
		if got := s.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(s), got, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	if d, err := ParseDuration("30m"); err != nil || d.Std() != 30*time.Minute {
		t.Errorf("ParseDuration(30m) = %v, %v", d, err)
	}
	if d, err := ParseDuration("none"); err != nil || d != Unlimited || d.Std() != 0 {
		t.Errorf("ParseDuration(none) = %v, %v", d, err)
	}
	if d, err := ParseDuration("0"); err != nil || d != Unlimited {
		t.Errorf("ParseDuration(0) = %v, %v; want none", d, err)
	}
	if _, err := ParseDuration("30"); err == nil {
		t.Error("ParseDuration(30): no error for a number without a unit")
	}
}

func writeIn(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadUserLimits(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		want    User
		wantErr []string
	}{
		{name: "empty"},
		{
			name: "limits",
			file: "open_network = true\n[limits]\ncpus = 4\nmemory = \"4G\"\ndisk = \"none\"\ntimeout = \"2h\"\nidle_ttl = \"5m\"\nmax_pull_bytes = 1073741824\nmax_files = 1000\nmax_file_size = \"10M\"\n",
			want: User{OpenNetwork: true, Limits: Limits{CPUs: 4, Memory: 4 * GiB, Disk: Unlimited, Timeout: Duration(2 * time.Hour),
				IdleTTL: Duration(5 * time.Minute), MaxPullBytes: GiB, MaxFiles: 1000, MaxFileSize: 10 * MiB}},
		},
		{
			// One file, every table: limits beside the network rules.
			name: "with network",
			file: "[network]\nallow = [\"example.com:443\"]\n[limits]\ncpus = 1\n",
			want: User{Limits: Limits{CPUs: 1}, Network: Network{Allow: []string{"example.com:443"}}},
		},
		{name: "typo in limits", file: "[limits]\ncpu = 4\n", wantErr: []string{"unknown keys limits.cpu"}},
		{name: "typo at top", file: "open_netwrok = true\n", wantErr: []string{"unknown keys open_netwrok"}},
		{
			name:    "every problem at once",
			file:    "[limits]\ncpus = -1\nmemory = \"1M\"\ndisk = \"1M\"\n",
			wantErr: []string{"cpus -1", "memory 1M", "disk 1M"},
		},
		{name: "bad size", file: "[limits]\nmemory = \"lots\"\n", wantErr: []string{"memory", "lots"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeIn(t, t.TempDir(), UserFileName, tt.file)
			got, err := LoadUser(p)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LoadUser: no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("LoadUser error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("LoadUser (-want +got):\n%s", diff)
			}
		})
	}
	if u, err := LoadUser(filepath.Join(t.TempDir(), "missing.toml")); err != nil || !cmp.Equal(u, User{}, cmpopts.EquateEmpty()) {
		t.Errorf("LoadUser(missing) = %+v, %v; want the zero User", u, err)
	}
}

func TestLoadProjectLimits(t *testing.T) {
	dir := t.TempDir()
	writeIn(t, dir, FileName, "exclude = [\"big/\"]\nopen_network = true\n[limits]\ncpus = 1\ntimeout = \"10m\"\n")
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Project{Exclude: []string{"big/"}, OpenNetwork: true, Limits: Limits{CPUs: 1, Timeout: Duration(10 * time.Minute)}}
	if p.SHA256 == "" {
		t.Error("Load did not record the file's SHA-256 (what a confirmation is for)")
	}
	if diff := cmp.Diff(want, p, cmpopts.IgnoreFields(Project{}, "SHA256")); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	writeIn(t, dir, FileName, "[limits]\nmemroy = \"1G\"\n")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "limits.memroy") {
		t.Errorf("Load with a typo in [limits]: %v", err)
	}
}

func TestResolve(t *testing.T) {
	def := DefaultLimits()
	with := func(f func(*Limits)) Limits { l := def; f(&l); return l }
	tests := []struct {
		name      string
		src       Sources
		want      Limits
		wantOpen  bool
		wantNotes []string
	}{
		{name: "defaults", want: def},
		{
			name: "user config",
			src:  Sources{User: User{Limits: Limits{CPUs: 1, Memory: 512 * MiB, Timeout: Unlimited}}},
			want: with(func(l *Limits) { l.CPUs, l.Memory, l.Timeout = 1, 512*MiB, Unlimited }),
		},
		{
			name: "project narrows",
			src:  Sources{Project: Project{Limits: Limits{CPUs: 1, Memory: GiB, Disk: 2 * GiB, Timeout: Duration(time.Minute), MaxFiles: 10}}},
			want: with(func(l *Limits) {
				l.CPUs, l.Memory, l.Disk, l.Timeout, l.MaxFiles = 1, GiB, 2*GiB, Duration(time.Minute), 10
			}),
		},
		{
			name: "project narrows an unlimited user setting",
			src:  Sources{User: User{Limits: Limits{Timeout: Unlimited}}, Project: Project{Limits: Limits{Timeout: Duration(time.Minute)}}},
			want: with(func(l *Limits) { l.Timeout = Duration(time.Minute) }),
		},
		{
			name: "project cannot widen",
			src:  Sources{Project: Project{Limits: Limits{CPUs: 8, Memory: 16 * GiB, Timeout: Unlimited, MaxPullBytes: Unlimited}}},
			want: def,
			wantNotes: []string{
				"airlock.toml asks for cpus = 8, more than the 2 allowed: ignored",
				"airlock.toml asks for memory = 16G, more than the 2G allowed: ignored",
				"airlock.toml asks for timeout = none, more than the 1h0m0s allowed: ignored",
				"airlock.toml asks for max_pull_bytes = none, more than the 4G allowed: ignored",
			},
		},
		{
			name:      "project cannot open the network",
			src:       Sources{Project: Project{OpenNetwork: true}},
			want:      def,
			wantNotes: []string{"airlock.toml asks for open_network = true: ignored"},
		},
		{
			name: "a confirmed project widens",
			src: Sources{Project: Project{OpenNetwork: true, Limits: Limits{CPUs: 3}},
				ConfirmWiden: func(key, p, a string) bool { return true }},
			want:     with(func(l *Limits) { l.CPUs = 3 }),
			wantOpen: true,
		},
		{
			name:     "user opens the network by config",
			src:      Sources{User: User{OpenNetwork: true}, Project: Project{OpenNetwork: true}},
			want:     def,
			wantOpen: true,
		},
		{name: "flag opens the network", src: Sources{OpenNetworkFlag: true}, want: def, wantOpen: true},
		{
			name: "flags win over the project",
			src:  Sources{Project: Project{Limits: Limits{CPUs: 1}}, Flags: Limits{CPUs: 4, Memory: 512 * MiB, Disk: GiB}},
			want: with(func(l *Limits) { l.CPUs, l.Memory, l.Disk = 4, 512*MiB, GiB }),
		},
		{
			name:      "cpus clamped to the host",
			src:       Sources{Flags: Limits{CPUs: 16}, HostCPUs: 4},
			want:      with(func(l *Limits) { l.CPUs = 4 }),
			wantNotes: []string{"cpus: 16 is more than this host's 4, using 4"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Resolve(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, e.Limits); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			if e.OpenNetwork != tt.wantOpen {
				t.Errorf("open network = %v, want %v", e.OpenNetwork, tt.wantOpen)
			}
			if len(e.Notes) != len(tt.wantNotes) {
				t.Fatalf("notes = %q, want %d", e.Notes, len(tt.wantNotes))
			}
			for i, w := range tt.wantNotes {
				if !strings.HasPrefix(e.Notes[i], w) {
					t.Errorf("note %d = %q, want it to start with %q", i, e.Notes[i], w)
				}
			}
		})
	}
	if _, err := Resolve(Sources{Flags: Limits{Memory: MiB}}); err == nil {
		t.Error("Resolve accepted 1M of memory")
	}
}

func TestLimitsJSON(t *testing.T) {
	l := DefaultLimits()
	l.Timeout = Unlimited
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"cpus":2,"memory":"2G","disk":"8G","timeout":"none","idle_ttl":"15m0s","max_pull_bytes":"4G","max_files":500000,"max_file_size":"1G"}`; string(b) != want {
		t.Errorf("JSON %s, want %s", b, want)
	}
	var back Limits
	if err := json.Unmarshal(b, &back); err != nil || back != l {
		t.Errorf("round trip: %+v, %v; want %+v", back, err, l)
	}
}
