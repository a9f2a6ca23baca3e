package cli

import (
	"os"
	"testing"
)

// asAirlockEnv makes a re-executed test binary act as airlock itself: the
// VM supervisors that exec and run spawn (os.Executable() vmhost DIR) are
// this test binary, so it must run Main for them.
const asAirlockEnv = "AIRLOCK_CLI_TEST_AS_AIRLOCK"

func TestMain(m *testing.M) {
	if os.Getenv(asAirlockEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv(asAirlockEnv, "1")
	os.Exit(m.Run())
}
