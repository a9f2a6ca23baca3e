package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/sync/manifest"
)

const pemRule = "private key or certificate bundle (*.pem, *.key, *.p12, *.pfx, *.ppk)"

// manyExclusions is what a snapshot of Go's sources leaves out: 31 test
// keys, an .env, and a few ignored files.
func manyExclusions() []manifest.Exclusion {
	var ex []manifest.Exclusion
	for i := range 31 {
		ex = append(ex, manifest.Exclusion{Path: fmt.Sprintf("crypto/tls/testdata/k%d.pem", i), Reason: manifest.ReasonSecret, Rule: pemRule})
	}
	ex = append(ex,
		manifest.Exclusion{Path: "cmd/.env", Reason: manifest.ReasonSecret, Rule: "environment file (.env, .env.*)"},
		manifest.Exclusion{Path: "x.log", Reason: manifest.ReasonGitignore, Rule: ".gitignore:1: *.log"},
		manifest.Exclusion{Path: "y.log", Reason: manifest.ReasonGitignore, Rule: ".gitignore:1: *.log"},
		manifest.Exclusion{Path: ".git", Dir: true, Reason: manifest.ReasonGitDir})
	return ex
}

func TestExclusionLinesCountManySecrets(t *testing.T) {
	got := exclusionLines("3f2a0b1c", manyExclusions())
	want := []string{
		"not copied, 32 secret-looking files (private key or certificate bundle, environment file): airlock status 3f2a0b1c lists them",
		"also not copied: 2 ignored by .gitignore, 1 .git (airlock logs --audit 3f2a0b1c lists them)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestExclusionLinesNameAFewSecrets(t *testing.T) {
	ex := []manifest.Exclusion{
		{Path: ".env", Reason: manifest.ReasonSecret, Rule: "environment file (.env, .env.*)"},
		{Path: ".ssh", Dir: true, Reason: manifest.ReasonSecret, Rule: "credential directory (.aws, .ssh, .gnupg, .azure)"},
		{Path: "server.pem", Reason: manifest.ReasonSecret, Rule: pemRule},
	}
	got := exclusionLines("3f2a0b1c", ex)
	want := []string{
		"not copied, looks like a secret: .env (environment file (.env, .env.*))",
		"not copied, looks like a secret: .ssh/ (credential directory (.aws, .ssh, .gnupg, .azure))",
		"not copied, looks like a secret: server.pem (" + pemRule + ")",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestSecretKindsMostFirst(t *testing.T) {
	ex := []manifest.Exclusion{
		{Reason: manifest.ReasonSecret, Rule: "environment file (.env, .env.*)"},
		{Reason: manifest.ReasonSecret, Rule: "direnv file (.envrc)"},
		{Reason: manifest.ReasonSecret, Rule: pemRule},
		{Reason: manifest.ReasonSecret, Rule: pemRule},
	}
	if got, want := secretKinds(ex), "private key or certificate bundle, environment file, …"; got != want {
		t.Errorf("secretKinds = %q, want %q", got, want)
	}
}

func TestPrintExclusionsQuiet(t *testing.T) {
	var errOut strings.Builder
	printExclusions(&env{stderr: &errOut, quiet: true}, "3f2a0b1c", manyExclusions())
	if errOut.Len() != 0 {
		t.Errorf("--quiet printed exclusions:\n%s", errOut.String())
	}
	printExclusions(&env{stderr: &errOut}, "3f2a0b1c", manyExclusions())
	if n := strings.Count(errOut.String(), "\n"); n != 2 {
		t.Errorf("%d lines for 32 secrets and 3 other exclusions, want 2:\n%s", n, errOut.String())
	}
}

// TestRunSummaryQuiet checks that --quiet keeps what needs the user (the
// sandbox, its status, warnings, what to do next) and drops the rest.
func TestRunSummaryQuiet(t *testing.T) {
	st, err := sandbox.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.Create(sandbox.Meta{Project: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	res := &pipeline.RunResult{Sandbox: sb, Summary: "Fixed the test.\n", Meta: sandbox.Meta{
		Status: sandbox.StatusReady, Network: sandbox.NetworkOpen,
		Changes: &sandbox.ChangeStats{Files: 2, Modified: 2, LinesAdded: 3, LinesRemoved: 1, Overview: "changed a.go, b.go"},
	}}
	var loud, quiet strings.Builder
	printRunSummary(&env{stdout: &loud}, res)
	printRunSummary(&env{stdout: &quiet, quiet: true}, res)
	for _, s := range []string{"Fixed the test.", "lines added", "What changed"} {
		if !strings.Contains(loud.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, loud.String())
		}
		if strings.Contains(quiet.String(), s) {
			t.Errorf("--quiet summary has %q:\n%s", s, quiet.String())
		}
	}
	for _, s := range []string{"Sandbox " + sb.ID + " is ready", openNetworkWarning, "Review: airlock diff " + sb.ID} {
		if !strings.Contains(quiet.String(), s) {
			t.Errorf("--quiet summary lacks %q:\n%s", s, quiet.String())
		}
	}
}

func TestWriteSecretsListsEveryOne(t *testing.T) {
	var out strings.Builder
	writeSecrets(&out, manifest.SecretPaths(manyExclusions()))
	if n := strings.Count(out.String(), ".pem\n"); n != 31 {
		t.Errorf("status lists %d of 31 keys:\n%s", n, out.String())
	}
	if !strings.HasPrefix(out.String(), "secrets   32 not copied, they look like secrets:\n") {
		t.Errorf("status secrets:\n%s", out.String())
	}
}

// TestNeededSurvivesQuiet checks that --quiet drops notes but keeps what
// needs the user, and --json drops both (it carries them as fields).
func TestNeededSurvivesQuiet(t *testing.T) {
	const needed = "airlock: interrupted: sandbox 3f2a is kept\n"
	for _, tc := range []struct {
		e    env
		want string
	}{
		{env{}, "airlock: progress\n" + needed},
		{env{quiet: true}, needed},
		{env{json: true}, ""},
	} {
		var errOut strings.Builder
		tc.e.stderr = &errOut
		tc.e.note("progress")
		tc.e.needed("interrupted: sandbox %s is kept", "3f2a")
		if errOut.String() != tc.want {
			t.Errorf("quiet=%v json=%v: stderr %q, want %q", tc.e.quiet, tc.e.json, errOut.String(), tc.want)
		}
	}
}
