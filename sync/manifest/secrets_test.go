package manifest

import (
	"slices"
	"testing"
)

func TestSecretPaths(t *testing.T) {
	got := SecretPaths([]Exclusion{
		{Path: ".env", Reason: ReasonSecret},
		{Path: "build", Dir: true, Reason: ReasonGitignore},
		{Path: ".ssh", Dir: true, Reason: ReasonSecret},
	})
	if want := []string{".env", ".ssh/"}; !slices.Equal(got, want) {
		t.Errorf("SecretPaths = %q, want %q", got, want)
	}
}
