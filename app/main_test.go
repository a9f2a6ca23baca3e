//go:build cgo

package main

import (
	"os"
	"testing"

	"github.com/airlock-dev/airlock/app/cli"
)

// asAirlockEnv makes a re-executed test binary act as airlock itself: the
// VM supervisors that runs spawn (os.Executable() vmhost DIR) are this
// test binary, so it must run the command line for them.
const asAirlockEnv = "AIRLOCK_APP_TEST_AS_AIRLOCK"

func TestMain(m *testing.M) {
	if os.Getenv(asAirlockEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Setenv(asAirlockEnv, "1")
	os.Exit(m.Run())
}
