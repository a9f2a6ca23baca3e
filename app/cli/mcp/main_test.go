package mcp

import (
	"testing"

	"github.com/airlock-dev/airlock/app/cli/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m) }
