package pipeline

import (
	"slices"
	"testing"

	"github.com/airlock-dev/airlock/sync/manifest"
)

func TestSecretPaths(t *testing.T) {
	got := secretPaths([]manifest.Exclusion{
		{Path: ".env", Reason: manifest.ReasonSecret},
		{Path: "build", Dir: true, Reason: manifest.ReasonGitignore},
		{Path: ".ssh", Dir: true, Reason: manifest.ReasonSecret},
	})
	if want := []string{".env", ".ssh/"}; !slices.Equal(got, want) {
		t.Errorf("secretPaths = %q, want %q", got, want)
	}
}
