package envspec

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/feature"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// asWrittenGoal is the share of the corpus Airlock should run as
// written, with Docker in the VM, Dockerfile builds, Compose services and
// every feature published to a registry installed by its install.sh. The
// golden file holds the share, so it cannot fall unnoticed.
const asWrittenGoal = 0.85

// corpusProject is one project of testdata/corpus.txt.
type corpusProject struct {
	repo, commit, config string
	files                map[string]string // path → git blob id
}

func (p corpusProject) dir(root string) string {
	return filepath.Join(root, strings.ReplaceAll(p.repo, "/", "__"))
}

// corpusRoot is where the copies of the corpus's files are: testdata/corpus
// when they are there, else envspec-corpus in the workplace's shared
// folder beside the repository (a folder above this one holding
// shared/envspec-corpus), else "".
func corpusRoot() string {
	if fi, err := os.Stat(filepath.Join("testdata", "corpus")); err == nil && fi.IsDir() {
		return filepath.Join("testdata", "corpus")
	}
	dir, err := os.Getwd()
	for err == nil {
		c := filepath.Join(dir, "shared", "envspec-corpus")
		if fi, e := os.Stat(c); e == nil && fi.IsDir() {
			return c
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	return ""
}

func readCorpus(t *testing.T) []corpusProject {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "corpus.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusProject
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch fields := strings.Fields(line); {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, " ") && len(fields) == 2 && len(out) > 0:
			out[len(out)-1].files[fields[0]] = fields[1]
		case len(fields) >= 3:
			out = append(out, corpusProject{repo: fields[0], commit: fields[1], config: fields[2], files: map[string]string{}})
		default:
			t.Fatalf("corpus.txt: bad line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// gitBlobID is the id git gives a file of this content.
func gitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// gap names the capability a warning that is not moot asks for, and
// whether Airlock means never to have it (by design, for the sandbox's
// sake).
func gap(w Warning) (capability string, never bool) {
	switch {
	case strings.Contains(w.Text, "${localEnv:") || strings.Contains(w.Text, "${env:"):
		return "the host's environment in the sandbox", true
	case w.Key == "initializeCommand":
		return "commands run on the host", true
	case strings.Contains(w.Key, ".env_file["):
		return "a .env file's variables in the sandbox", true
	case strings.HasPrefix(w.Key, "mounts["):
		return "mounts of the host's folders", true
	case strings.HasPrefix(w.Key, "features."):
		// Every feature published to a registry is installed by its
		// install.sh; what is left are the others.
		return "features not published to a registry (a folder of the project, a tarball's URL)", false
	case w.Key == "postStartCommand" || w.Key == "postAttachCommand":
		return "commands run as each sandbox starts (postStartCommand, postAttachCommand)", false
	case strings.HasPrefix(w.Key, "runArgs[") && strings.Contains(w.Text, `"--add-host `):
		return "host names of runArgs --add-host", false
	}
	return w.Key, false
}

// classify is one project's line of the table: its form and whether it
// runs as written, with the reasons when it does not.
func classify(env *Environment) (form string, reasons []string) {
	switch {
	case env.Compose != nil:
		form = "compose"
	case env.Build != nil:
		form = "dockerfile"
	default:
		form = "image"
	}
	if env.Docker {
		form += "+docker"
	}
	for _, w := range env.Warnings {
		if !w.Moot {
			_, text, _ := strings.Cut(w.Text, ": ")
			reasons = append(reasons, text)
		}
	}
	return form, reasons
}

// TestCorpus reads the devcontainer setups of public projects (the
// copies testdata/corpus.txt lists) and says which Airlock runs as
// written, the others with their reasons: the table and the share are
// testdata/corpus.golden.
func TestCorpus(t *testing.T) {
	projects := readCorpus(t)
	if len(projects) < 25 {
		t.Fatalf("the corpus has %d projects; it should have at least 25", len(projects))
	}
	golden := filepath.Join("testdata", "corpus.golden")
	want, err := os.ReadFile(golden)
	if err != nil && !*update {
		t.Fatal(err)
	}
	for _, p := range projects {
		if !*update && !strings.Contains(string(want), "\n"+p.repo+": ") && !strings.HasPrefix(string(want), p.repo+": ") {
			t.Errorf("corpus.golden has no line for %s", p.repo)
		}
	}
	root := corpusRoot()
	var missing []string
	for _, p := range projects {
		if _, err := os.Stat(p.dir(root)); root == "" || err != nil {
			missing = append(missing, p.repo)
		}
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("the corpus's copies are not here (%s…): copy each file corpus.txt lists (git show COMMIT:PATH) "+
			"into testdata/corpus/OWNER__REPO/ or the shared folder's envspec-corpus/OWNER__REPO/", missing[0])
		// The copies are the projects' own files (several under
		// licences Airlock's is not), so they are not in this
		// repository, and no machine of CI's has them: the share is
		// measured where they are, and corpus.golden keeps it.
		t.Skip(msg)
	}
	var b strings.Builder
	asWritten := 0
	needs := map[string]map[string]bool{} // capability → projects needing it
	blocked := map[string][]string{}      // project → the capabilities it needs
	never := map[string]bool{}
	for _, p := range projects {
		for name, id := range p.files {
			data, err := os.ReadFile(filepath.Join(p.dir(root), filepath.FromSlash(name)))
			if err != nil {
				t.Fatal(err)
			}
			if got := gitBlobID(data); got != id {
				t.Errorf("%s %s: blob %s, want %s (not the file at %s)", p.repo, name, got, id, p.commit)
			}
		}
		env, err := ReadDevcontainer(p.dir(root), p.config)
		if err != nil {
			fmt.Fprintf(&b, "%s: refused: %v\n", p.repo, err)
			continue
		}
		form, reasons := classify(env)
		if len(reasons) == 0 {
			asWritten++
			fmt.Fprintf(&b, "%s: %s: as written\n", p.repo, form)
			continue
		}
		fmt.Fprintf(&b, "%s: %s: not as written\n", p.repo, form)
		for _, r := range reasons {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
		for _, w := range env.Warnings {
			if w.Moot {
				continue
			}
			c, nv := gap(w)
			if needs[c] == nil {
				needs[c] = map[string]bool{}
			}
			if !needs[c][p.repo] {
				blocked[p.repo] = append(blocked[p.repo], c)
			}
			needs[c][p.repo], never[c] = true, nv
		}
	}
	// The features installed by their own install.sh, and those whose
	// downloads Airlock knows no hosts for: they get @debian and what the
	// project lists (customizations.airlock.hosts).
	installed, unknown := map[string]bool{}, map[string]bool{}
	for _, p := range projects {
		env, err := ReadDevcontainer(p.dir(root), p.config)
		if err != nil {
			continue
		}
		for _, f := range env.Features {
			if f.InstalledByScript() {
				installed[feature.BaseRef(f.Ref)] = true
				if _, ok := feature.Hosts(f.Ref); !ok {
					unknown[feature.BaseRef(f.Ref)] = true
				}
			}
		}
	}
	fmt.Fprintf(&b, "\nfeatures installed by their install.sh: %d; of them, with hosts Airlock does not know (@debian and the project's own): %s\n",
		len(installed), strings.Join(slices.Sorted(maps.Keys(unknown)), ", "))
	share := float64(asWritten) / float64(len(projects))
	fmt.Fprintf(&b, "\nas written: %d of %d (%.0f%%); goal %.0f%%\n", asWritten, len(projects), 100*share, 100*asWrittenGoal)
	fmt.Fprintf(&b, "\nwhat the others need (projects needing it; of them, projects needing nothing else):\n")
	reachable := asWritten
	for _, c := range slices.Sorted(maps.Keys(needs)) {
		alone := 0
		for repo := range needs[c] {
			if len(blocked[repo]) == 1 {
				alone++
			}
		}
		mark := ""
		if never[c] {
			mark = " (never, by design)"
		}
		fmt.Fprintf(&b, "  %s%s: %d; %d\n", c, mark, len(needs[c]), alone)
	}
	for _, caps := range blocked {
		if !slices.ContainsFunc(caps, func(c string) bool { return never[c] }) {
			reachable++
		}
	}
	fmt.Fprintf(&b, "with every capability above but those never had: %d of %d (%.0f%%)\n", reachable, len(projects), 100*float64(reachable)/float64(len(projects)))
	t.Logf("\n%s", b.String())
	if share < asWrittenGoal {
		t.Logf("the share Airlock runs as written, %.0f%%, is below the goal of %.0f%%", 100*share, 100*asWrittenGoal)
	}
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		want = []byte(b.String())
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Errorf("the corpus reads otherwise than testdata/corpus.golden (-want +got; go test -run TestCorpus -update to accept):\n%s", diff)
	}
}
