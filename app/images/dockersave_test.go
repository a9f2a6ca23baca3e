package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/envspec"
	"github.com/airlock-dev/airlock/testkit/ocitest"
	"github.com/airlock-dev/airlock/vm/oci"
)

// savedTar is what Docker 20.10's `docker save` writes for img: each
// layer an uncompressed tar (ID/layer.tar), the configuration (ID.json)
// and manifest.json naming them.
func savedTar(t *testing.T, img v1.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	put := func(name string, body []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write(body)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		body.ReadFrom(rc)
		rc.Close()
		dir := fmt.Sprintf("%064d", i)
		tw.WriteHeader(&tar.Header{Name: dir + "/", Typeflag: tar.TypeDir, Mode: 0o755})
		put(dir+"/layer.tar", body.Bytes())
		paths = append(paths, dir+"/layer.tar")
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := img.ConfigName()
	put(id.Hex+".json", cfg)
	m, _ := json.Marshal([]map[string]any{{"Config": id.Hex + ".json", "RepoTags": []string{"airlock-dockerfile:build"}, "Layers": paths}})
	put("manifest.json", m)
	tw.Close()
	return b.Bytes()
}

func TestReadDockerSave(t *testing.T) {
	big := strings.Repeat("x", 2<<20) // past maxSavedSmall: streamed into a blob
	img := ocitest.Image(t, "amd64", []string{"PATH=/usr/bin", "A=1"},
		ocitest.Layer(t, ocitest.Entry{Name: "etc/hello", Body: "hello"}),
		ocitest.Layer(t, ocitest.Entry{Name: "big", Body: big}))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf.Config.User, cf.Config.WorkingDir = "dev", "/work"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	st := oci.Store{Dir: t.TempDir()}
	got, err := readDockerSave(bytes.NewReader(savedTar(t, img)), st, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := img.ConfigName()
	if got.ID != id || got.Platform != "linux/amd64" || got.Config.User != "dev" || got.Config.WorkingDir != "/work" || len(got.Config.Env) != 2 {
		t.Errorf("read %+v", got)
	}
	if len(got.Layers) != 2 || got.Layers[0] != cf.RootFS.DiffIDs[0] || got.Layers[1] != cf.RootFS.DiffIDs[1] {
		t.Fatalf("layers %v, want the diff_ids %v", got.Layers, cf.RootFS.DiffIDs)
	}
	for _, d := range got.Layers {
		if !st.Has(d) {
			t.Errorf("layer %s is not in the store", d)
		}
	}
}

// TestReadDockerSaveRefuses: what a hostile builder could send instead of
// an image keeps nothing and says what is wrong.
func TestReadDockerSaveRefuses(t *testing.T) {
	img := ocitest.Image(t, "amd64", nil, ocitest.Layer(t, ocitest.Entry{Name: "etc/hello", Body: "hello"}))
	good := savedTar(t, img)
	entries := func(t *testing.T, b []byte) []tarEntry {
		tr := tar.NewReader(bytes.NewReader(b))
		var out []tarEntry
		for {
			h, err := tr.Next()
			if err != nil {
				return out
			}
			var body bytes.Buffer
			body.ReadFrom(tr)
			out = append(out, tarEntry{h, body.Bytes()})
		}
	}
	rewrite := func(f func([]tarEntry) []tarEntry) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range f(entries(t, good)) {
			e.h.Size = int64(len(e.body))
			if e.h.Typeflag != tar.TypeReg {
				e.h.Size = 0
			}
			tw.WriteHeader(e.h)
			tw.Write(e.body)
		}
		tw.Close()
		return b.Bytes()
	}
	manifest := func(es []tarEntry) *tarEntry {
		for i := range es {
			if es[i].h.Name == "manifest.json" {
				return &es[i]
			}
		}
		t.Fatal("no manifest.json")
		return nil
	}
	tests := []struct {
		name  string
		data  []byte
		limit int64
		want  string
	}{
		{name: "not a tar", data: []byte("hello"), want: "not a tar archive"},
		{name: "larger than the cap", data: good, limit: 1024, want: "larger than Airlock takes"},
		{name: "a path out of the archive", data: rewrite(func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{&tar.Header{Name: "../../etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644}, []byte("x")})
		}), want: "has a file named"},
		{name: "a link out of the archive", data: rewrite(func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{&tar.Header{Name: "escape", Typeflag: tar.TypeSymlink, Linkname: "../../../etc/shadow"}, nil})
		}), want: "links \"escape\" out of itself"},
		{name: "a device", data: rewrite(func(es []tarEntry) []tarEntry {
			return append(es, tarEntry{&tar.Header{Name: "dev", Typeflag: tar.TypeChar}, nil})
		}), want: "of a kind"},
		{name: "a file twice", data: rewrite(func(es []tarEntry) []tarEntry {
			return append(es, *manifest(es))
		}), want: "twice"},
		{name: "no manifest", data: rewrite(func(es []tarEntry) []tarEntry {
			m := manifest(es)
			m.h.Name = "not-the-manifest.json"
			return es
		}), want: "does not hold"},
		{name: "two images", data: rewrite(func(es []tarEntry) []tarEntry {
			m := manifest(es)
			var list []json.RawMessage
			json.Unmarshal(m.body, &list)
			m.body, _ = json.Marshal(append(list, list...))
			return es
		}), want: "no manifest.json of one image"},
		{name: "a layer that is not its diff_id", data: rewrite(func(es []tarEntry) []tarEntry {
			for i := range es {
				if strings.HasSuffix(es[i].h.Name, "/layer.tar") {
					es[i].body = ocitest.Tar(t, ocitest.Entry{Name: "etc/hello", Body: "swapped"})
				}
			}
			return es
		}), want: "is not the one its configuration names"},
		{name: "a manifest naming a file outside", data: rewrite(func(es []tarEntry) []tarEntry {
			m := manifest(es)
			m.body = []byte(`[{"Config":"../config.json","Layers":[]}]`)
			return es
		}), want: "names a file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.limit
			if limit == 0 {
				limit = 1 << 30
			}
			st := oci.Store{Dir: t.TempDir()}
			_, err := readDockerSave(bytes.NewReader(tt.data), st, limit)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}

type tarEntry struct {
	h    *tar.Header
	body []byte
}

// TestDockerfileAllow: a Dockerfile build may reach its FROM images'
// registries read-only, by their presets where there is one, Debian's
// mirror and the environment's hosts, each once; never a registry named
// by an address or a name that is not public (the host's own services,
// its LAN).
func TestDockerfileAllow(t *testing.T) {
	spec := &envspec.Environment{Build: &envspec.Build{From: []envspec.From{
		{Ref: "debian:bookworm"}, {Ref: "docker.io/library/golang:1.24"}, {Ref: "ghcr.io/o/r:1"},
		{Ref: "mcr.microsoft.com/devcontainers/go:1"}, {Ref: "quay.io/o/r@sha256:" + strings.Repeat("a", 64)}, {Ref: "ghcr.io/o/other"},
		{Ref: "10.0.0.5:5000/lan:1"}, {Ref: "localhost:5000/host:1"}, {Ref: "registry:5000/intranet"},
	}}, Hosts: []string{"proxy.golang.org", "@debian"}}
	want := []string{"@debian", "@docker", "@ghcr", "@mcr", "quay.io:443 (GET,HEAD)", "proxy.golang.org"}
	if diff := cmp.Diff(want, DockerfileAllow(spec)); diff != "" {
		t.Errorf("allow (-want +got):\n%s", diff)
	}
	for _, a := range DockerfileAllow(spec) {
		if _, err := egress.ParseRules(a); err != nil {
			t.Errorf("%q: %v", a, err)
		}
	}
}

// TestRegistryCredentials: the host's Docker sign-ins for a Dockerfile's
// FROM registries become the proxy's credentials (Docker Hub's for its
// API and token hosts); a registry without one gives none.
func TestRegistryCredentials(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"auths": {"https://index.docker.io/v1/": {"auth": "aHViOnB3"}, "private.example": {"username": "me", "password": "secret"}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	got := registryCredentials([]string{"debian", "private.example/team/base:1", "ghcr.io/o/r:1", "private.example/other"}, authn.DefaultKeychain)
	want := []egress.Credential{
		{Hosts: []string{"registry-1.docker.io", "auth.docker.io"}, Authorization: "Basic aHViOnB3", Name: "registry credentials for index.docker.io"},
		{Hosts: []string{"private.example"}, Authorization: "Basic bWU6c2VjcmV0", Name: "registry credentials for private.example"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
}

// TestRunRegistryCredentials: a run's policy gives the sign-ins of the
// registries it lets the proxy look into (read-only @docker and @ghcr,
// a user's registry with methods); a tunnel, a wildcard and another port
// give none, and a registry without a sign-in gives none.
func TestRunRegistryCredentials(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"auths": {"https://index.docker.io/v1/": {"auth": "aHViOnB3"}, "ghcr.io": {"auth": "Z2g6cHc="},
		"tunnel.example": {"auth": "dDpwdw=="}, "other-port.example": {"auth": "bzpwdw=="}, "a.other.example": {"auth": "dzpwdw=="}}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dir)
	var allow []egress.Rule
	for _, a := range []string{"@docker", "@ghcr", "tunnel.example", "other-port.example:5000 (GET)", "*.other.example (GET)", "quay.io (GET,HEAD)"} {
		rs, err := egress.ParseRules(a)
		if err != nil {
			t.Fatal(err)
		}
		allow = append(allow, rs...)
	}
	got := RunRegistryCredentials(&egress.Policy{Allow: allow})
	want := []egress.Credential{
		{Hosts: []string{"registry-1.docker.io", "auth.docker.io"}, Authorization: "Basic aHViOnB3", Name: "registry credentials for index.docker.io"},
		{Hosts: []string{"ghcr.io"}, Authorization: "Basic Z2g6cHc=", Name: "registry credentials for ghcr.io"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
}
