package feature

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/testkit/ocitest"
)

const meta = `{"id": "hello", "version": "1.0.0",
  "options": {"greeting": {"type": "string", "default": "hi"}, "loud": {"type": "boolean", "default": true}, "name": {"type": "string"}},
  "containerEnv": {"HELLO": "1", "PATH": "/opt/hello:${PATH}"},
  "installsAfter": ["ghcr.io/devcontainers/features/common-utils"]}`

func good() []ocitest.Entry {
	return []ocitest.Entry{
		{Name: "./", Type: tar.TypeDir},
		{Name: "./devcontainer-feature.json", Body: meta},
		{Name: "./install.sh", Mode: 0o755, Body: "#!/bin/sh\necho hi\n"},
		{Name: "./lib/", Type: tar.TypeDir},
		{Name: "./lib/x.sh", Body: "x"},
	}
}

func TestRead(t *testing.T) {
	files, m, err := Read(ocitest.Tar(t, good()...))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if diff := cmp.Diff([]string{"devcontainer-feature.json", "install.sh", "lib", "lib/x.sh"}, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if m.ID != "hello" || m.Options["greeting"].Default != "hi" || m.Options["loud"].Default != "true" || m.ContainerEnv["HELLO"] != "1" {
		t.Errorf("metadata: %+v", m)
	}
	// A gzip-compressed layer reads the same.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(ocitest.Tar(t, good()...))
	zw.Close()
	if _, _, err := Read(gz.Bytes()); err != nil {
		t.Errorf("gzip layer: %v", err)
	}
}

// oversize is a tar whose one entry says it is larger than a feature may
// hold (its body never sent).
func oversize() []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "install.sh", Typeflag: tar.TypeReg, Mode: 0o755, Size: MaxUnpacked + 1})
	return buf.Bytes()
}

func TestReadRefuses(t *testing.T) {
	with := func(e ...ocitest.Entry) []byte { return ocitest.Tar(t, append(good(), e...)...) }
	without := func(name string) []byte {
		var es []ocitest.Entry
		for _, e := range good() {
			if e.Name != name {
				es = append(es, e)
			}
		}
		return ocitest.Tar(t, es...)
	}
	metaWith := func(m string) []byte {
		es := good()
		es[1].Body = m
		return ocitest.Tar(t, es...)
	}
	for name, tc := range map[string]struct {
		layer []byte
		want  string
	}{
		"path traversal":        {with(ocitest.Entry{Name: "../../etc/cron.d/x", Body: "x"}), "not inside the feature"},
		"traversal inside":      {with(ocitest.Entry{Name: "lib/../../x", Body: "x"}), "not inside the feature"},
		"absolute path":         {with(ocitest.Entry{Name: "/etc/passwd", Body: "x"}), "not inside the feature"},
		"symlink out":           {with(ocitest.Entry{Name: "lib/out", Type: tar.TypeSymlink, Linkname: "/etc"}), "not a regular file or a directory"},
		"hard link":             {with(ocitest.Entry{Name: "lib/hard", Type: tar.TypeLink, Linkname: "install.sh"}), "not a regular file or a directory"},
		"device":                {with(ocitest.Entry{Name: "lib/dev", Type: tar.TypeChar}), "not a regular file or a directory"},
		"twice":                 {with(ocitest.Entry{Name: "install.sh", Body: "again"}), "twice"},
		"oversize":              {oversize(), "more than 64 MiB"},
		"not a tar":             {[]byte("{}"), "not a tar"},
		"no install.sh":         {without("./install.sh"), "no install.sh"},
		"no metadata":           {without("./devcontainer-feature.json"), "no devcontainer-feature.json"},
		"bad JSON":              {metaWith(`{"id": "x",`), "devcontainer-feature.json"},
		"no id":                 {metaWith(`{"options": {}}`), "has no id"},
		"bad option name":       {metaWith(`{"id": "x", "options": {"a b;c": {"type": "string"}}}`), "not an option name"},
		"bad containerEnv name": {metaWith(`{"id": "x", "containerEnv": {"A=B": "x"}}`), "containerEnv"},
		"metadata too large":    {metaWith(`{"id": "x", "name": "` + strings.Repeat("a", MaxMetadata) + `"}`), "over 256 KiB"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := Read(tc.layer)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestSafeID(t *testing.T) {
	for in, want := range map[string]string{
		"version": "VERSION", "nodeGypDependencies": "NODEGYPDEPENDENCIES", "install-tools": "INSTALL_TOOLS",
		"a.b": "A_B", "9lives": "_LIVES", "__x": "_X", "_1a": "_A",
	} {
		if got := SafeID(in); got != want {
			t.Errorf("SafeID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInstallEnv(t *testing.T) {
	m, err := ParseMetadata([]byte(meta))
	if err != nil {
		t.Fatal(err)
	}
	// A value with shell metacharacters is kept as it is: it reaches
	// install.sh as a variable's value, never as shell text.
	evil := "$(touch /pwned); `id` \"'\n"
	env, err := InstallEnv(m, map[string]string{"greeting": evil, "extra-one": "x"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GREETING": evil, "LOUD": "true", "NAME": "", "EXTRA_ONE": "x"}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("InstallEnv (-want +got):\n%s", diff)
	}
	for name, opts := range map[string]map[string]string{
		"reserved":  {"_remote_user": "root"},
		"bad name":  {"a=b": "x"},
		"NUL value": {"greeting": "a\x00b"},
	} {
		if _, err := InstallEnv(m, opts); err == nil {
			t.Errorf("%s: InstallEnv accepted %q", name, opts)
		}
	}
}

func TestOrder(t *testing.T) {
	md := func(after []string, deps ...string) *Metadata {
		m := &Metadata{InstallsAfter: after, DependsOn: map[string]json.RawMessage{}}
		for _, d := range deps {
			m.DependsOn[d] = []byte("{}")
		}
		return m
	}
	refs := []string{"ghcr.io/devcontainers/features/go:1", "ghcr.io/devcontainers/features/common-utils:2", "example.com/x/y:1", "ghcr.io/devcontainers/features/node:1"}
	metas := []*Metadata{
		md([]string{"ghcr.io/devcontainers/features/common-utils"}),
		md(nil),
		md(nil, "ghcr.io/devcontainers/features/node:1"),
		md([]string{"ghcr.io/devcontainers/features/python"}), // not installed: no constraint
	}
	got, err := Order(refs, metas)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 0, 3, 2}, got); diff != "" {
		t.Errorf("Order (-want +got):\n%s", diff)
	}
	if _, err := Order(refs[:1], []*Metadata{md(nil, "ghcr.io/devcontainers/features/missing:1")}); err == nil || !strings.Contains(err.Error(), "add it to features") {
		t.Errorf("a missing dependency: %v", err)
	}
	if _, err := Order(refs[:2], []*Metadata{md([]string{refs[1]}), md([]string{refs[0]})}); err == nil || !strings.Contains(err.Error(), "cannot be ordered") {
		t.Errorf("a cycle: %v", err)
	}
}

func TestTarMasksModes(t *testing.T) {
	files, _, err := Read(ocitest.Tar(t, append(good(), ocitest.Entry{Name: "lib/suid", Mode: 0o4777, Body: "x"})...))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Tar(files)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Mode&^0o755 != 0 || h.Uid != 0 || (h.Name == "install.sh" && h.Mode != 0o755) {
			t.Errorf("%s: mode %o uid %d", h.Name, h.Mode, h.Uid)
		}
	}
	if _, _, err := Read(b); err != nil {
		t.Errorf("the re-made tar does not read: %v", err)
	}
}

func TestFetch(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ref := reg.Push(t, "features/hello:1", ocitest.Feature(t, ocitest.Tar(t, good()...)))
	a, err := Fetch(context.Background(), ref, FetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Meta.ID != "hello" || !strings.HasPrefix(a.Digest, "sha256:") || len(a.Files) != 4 {
		t.Errorf("Fetch: %+v", a)
	}
	// An image is not a feature.
	img := reg.Push(t, "library/img:1", ocitest.Image(t, "amd64", nil, ocitest.Layer(t, good()...)))
	if _, err := Fetch(context.Background(), img, FetchOptions{}); err == nil || !strings.Contains(err.Error(), "no "+LayerMediaType+" layer") {
		t.Errorf("an image fetched as a feature: %v", err)
	}
	// A feature whose layer is over the cap is not downloaded.
	big := reg.Push(t, "features/big:1", ocitest.Feature(t, bytes.Repeat([]byte{0}, MaxLayer+1)))
	if _, err := Fetch(context.Background(), big, FetchOptions{}); err == nil || !strings.Contains(err.Error(), "over the 16 MiB") {
		t.Errorf("an oversize feature: %v", err)
	}
	bad := reg.Push(t, "features/bad:1", ocitest.Feature(t, ocitest.Tar(t, append(good(), ocitest.Entry{Name: "../x", Body: "x"})...)))
	if _, err := Fetch(context.Background(), bad, FetchOptions{}); err == nil || !strings.Contains(err.Error(), "not inside the feature") {
		t.Errorf("a feature with a path out: %v", err)
	}
}

func TestHosts(t *testing.T) {
	for _, ref := range []string{"ghcr.io/devcontainers/features/node:1", "ghcr.io/devcontainers/features/go@sha256:abc", "ghcr.io/devcontainers/features/github-cli"} {
		if h, ok := Hosts(ref); !ok || len(h) == 0 {
			t.Errorf("Hosts(%q) = %v, %v", ref, h, ok)
		}
	}
	if h, ok := Hosts("ghcr.io/rails/devcontainer/features/postgres-client:1"); ok || h != nil {
		t.Errorf("a feature of another publisher has known hosts: %v", h)
	}
}

// Every host the table names is one the egress proxy's rules take.
func TestHostsParse(t *testing.T) {
	for name, hosts := range officialHosts {
		for _, h := range hosts {
			if _, err := egress.ParseRules(h); err != nil {
				t.Errorf("%s: %q: %v", name, h, err)
			}
		}
	}
}
