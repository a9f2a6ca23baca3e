package packaging

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBuildScriptDryRun runs packaging/build-macos.sh --dry-run, which
// works on any host: it prints the Mac build's commands and the bundle
// layout without running them.
func TestBuildScriptDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles airlock-bundle; skipped with -short")
	}
	run := func(env ...string) (string, error) {
		cmd := exec.Command("bash", "build-macos.sh", "--dry-run")
		cmd.Env = append(cmd.Environ(), append([]string{"VERSION=v1.0.0", "OUT=" + t.TempDir()}, env...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("CODESIGN_IDENTITY=Developer ID Application: Airlock (TEAM)", "NOTARY_PROFILE=airlock")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"GOOS=darwin GOARCH=arm64",
		"GOOS=darwin GOARCH=amd64",
		"+ lipo -create -output ",
		"Airlock.app/Contents/MacOS/airlock  <- ",
		"Airlock.app/Contents/Resources/images/minimal/arm64/kernel",
		"--entitlements packaging/airlock.entitlements --options runtime --timestamp ",
		"+ hdiutil create -volname Airlock ",
		"Airlock-v1.0.0.dmg --keychain-profile airlock --wait",
		"+ xcrun stapler staple ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}

	out, err = run()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "codesign --force --sign - --entitlements packaging/airlock.entitlements ") ||
		strings.Contains(out, "--options runtime") || strings.Contains(out, "notarytool") {
		t.Errorf("the default build should sign ad-hoc, without the hardened runtime or notarization:\n%s", out)
	}

	if out, err := run("NOTARY_PROFILE=airlock"); err == nil || !strings.Contains(out, "needs a Developer ID") {
		t.Errorf("notarizing an ad-hoc signature: %v\n%s", err, out)
	}
}
